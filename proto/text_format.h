// Parsing text-format protos (configs, grids, profiles, measured data) with
// errors that say where: "FILE:LINE:COLUMN: message" (every error joined
// by "; "). The one place the project reads text protos.
#ifndef SERVESIM_PROTO_TEXT_FORMAT_H_
#define SERVESIM_PROTO_TEXT_FORMAT_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

namespace servesim {

// Parses `text` into `message` (cleared first unless `merge`). `where`
// names the source (a path, or "--set" for a flag) in error messages.
// InvalidArgument on a syntax error or an unknown field. When `locations`
// is given it receives each field's line and column (for errors about a
// value that parsed but is out of range).
absl::Status ParseTextProto(
    std::string_view text, const std::string& where, google::protobuf::Message* message,
    bool merge = false, google::protobuf::TextFormat::ParseInfoTree* locations = nullptr);

// Reads the file at `path` and parses it. NotFound when it cannot be read.
absl::Status ReadTextProtoFile(const std::string& path,
                               google::protobuf::Message* message);

}  // namespace servesim

#endif  // SERVESIM_PROTO_TEXT_FORMAT_H_

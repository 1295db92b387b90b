// libFuzzer target: the JSON DOM parser and the flat JSONL parser never
// crash and agree that valid flat lines are valid.
#include <string_view>

#include "traces/json.h"
#include "traces/parse_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto doc = servesim::ParseJson(text, "fuzz");
  servesim::FlatJsonParser flat;
  const bool flat_ok = flat.Parse(text).ok();
  // Whatever the flat parser accepts is a JSON object the DOM parser accepts.
  if (flat_ok && (!doc.ok() || doc->type != servesim::JsonValue::Type::kObject))
    __builtin_trap();
  int64_t ns = 0;
  (void)servesim::ParseTimestampToNs(text, &ns);
  (void)servesim::ParseDecimalToNs(text, 1'000'000'000, &ns);
  (void)servesim::IsValidUtf8(text);
  return 0;
}

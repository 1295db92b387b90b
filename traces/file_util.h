// Whole-file and streaming byte input for trace readers. Files compressed
// with gzip (detected by their magic bytes, whatever the extension) are
// decompressed on the fly with zlib.
#ifndef SERVESIM_TRACES_FILE_UTIL_H_
#define SERVESIM_TRACES_FILE_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace servesim {

// OK when `path` can be opened as a trace file: a regular file, not a
// directory (fopen of a directory succeeds on Linux and then reads as an
// empty file) nor a pipe, FIFO or device (a trace is opened more than
// once). Missing files are left to the caller's open, which names the errno.
absl::Status CheckRegularFile(const std::string& path);

// Reads a whole (possibly gzipped) file. Files over `max_bytes` after
// decompression are an error (a bench result is a few MB; this bounds
// memory on a wrong path).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path,
                                          size_t max_bytes = size_t{1} << 30);

// The longest line a text trace reader takes (and a writer writes).
inline constexpr size_t kMaxTraceLineBytes = size_t{64} << 20;

// Reads a (possibly gzipped) file line by line with a fixed-size buffer.
// Lines end at "\n"; a trailing "\r" is removed. Thread-compatible; not
// copyable. Memory: O(buffer + longest line); lines over `max_line_bytes`
// are an error.
class LineReader {
 public:
  static absl::StatusOr<std::unique_ptr<LineReader>> Open(
      const std::string& path, size_t max_line_bytes = kMaxTraceLineBytes);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Sets `line` to the next line (without its terminator; valid until the
  // next call) and returns true; false at the end of the file.
  absl::StatusOr<bool> Next(std::string_view& line);

  // 1-based number of the line last returned.
  int64_t line_number() const { return line_number_; }
  // Whether the last returned line ended with "\n" (false only for a
  // final line with no terminator).
  bool last_line_terminated() const { return last_terminated_; }
  const std::string& path() const { return path_; }
  // Bytes of input consumed so far (compressed bytes for gzip).
  bool gzipped() const { return gz_ != nullptr; }

 private:
  LineReader() = default;
  // Reads more input at buf_end_; returns bytes read (0 at end).
  absl::StatusOr<size_t> Fill();

  std::string path_;
  size_t max_line_bytes_ = 0;
  std::FILE* file_ = nullptr;
  void* gz_ = nullptr;  // gzFile
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0;
  size_t begin_ = 0;  // start of unread data
  size_t end_ = 0;    // end of valid data
  bool eof_ = false;
  int64_t line_number_ = 0;
  bool last_terminated_ = true;
};

}  // namespace servesim

#endif  // SERVESIM_TRACES_FILE_UTIL_H_

#include "traces/file_util.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace servesim {
namespace {

constexpr size_t kInitialBuffer = size_t{1} << 18;

bool HasGzipMagic(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  unsigned char magic[2] = {0, 0};
  const size_t n = std::fread(magic, 1, 2, f);
  std::fclose(f);
  return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

}  // namespace

absl::Status CheckRegularFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return absl::OkStatus();  // open names why
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a directory, not a trace file"));
  }
  if (!S_ISREG(st.st_mode)) {
    // A FIFO or pipe (<(zcat ...)) hung with no writer, and each open took
    // its own share of the data: the format probe ate the first 4 KB.
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": is ", S_ISFIFO(st.st_mode) ? "a pipe or FIFO" : "a device or socket",
        ", not a regular file: a trace is opened more than once (its format, gzip, "
        "then its records); write it to a file first (gzipped files are read as they "
        "are)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, size_t max_bytes) {
  if (absl::Status st = CheckRegularFile(path); !st.ok()) return st;
  std::FILE* probe = std::fopen(path.c_str(), "rb");
  if (probe == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::fclose(probe);
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string out;
  char buf[1 << 16];
  while (true) {
    const int n = gzread(gz, buf, sizeof(buf));
    if (n < 0) {
      int errnum = 0;
      const std::string msg = gzerror(gz, &errnum);
      gzclose(gz);
      return absl::DataLossError(absl::StrCat(path, ": read error: ", msg));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      gzclose(gz);
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": larger than ", max_bytes, " bytes"));
    }
  }
  // gzread silently accepts a gzip stream cut short; gzclose reports it.
  int errnum = 0;
  const char* msg = gzerror(gz, &errnum);
  if (errnum != Z_OK && errnum != Z_BUF_ERROR) {
    const std::string m = msg;
    gzclose(gz);
    return absl::DataLossError(absl::StrCat(path, ": ", m));
  }
  const int rc = gzclose(gz);
  if (rc == Z_BUF_ERROR) {
    return absl::DataLossError(absl::StrCat(path, ": gzip stream truncated"));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path,
                                                             size_t max_line_bytes) {
  if (absl::Status st = CheckRegularFile(path); !st.ok()) return st;
  std::unique_ptr<LineReader> r(new LineReader());
  r->path_ = path;
  r->max_line_bytes_ = max_line_bytes;
  if (HasGzipMagic(path)) {
    gzFile gz = gzopen(path.c_str(), "rb");
    if (gz == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
    gzbuffer(gz, 1 << 18);
    r->gz_ = gz;
  } else {
    r->file_ = std::fopen(path.c_str(), "rb");
    if (r->file_ == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    }
  }
  r->cap_ = kInitialBuffer;
  r->buf_ = std::make_unique_for_overwrite<char[]>(r->cap_);
  return r;
}

LineReader::~LineReader() {
  if (file_ != nullptr) std::fclose(file_);
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

absl::StatusOr<size_t> LineReader::Fill() {
  if (eof_) return 0;
  // Make room: move unread data to the front, grow if the buffer is full.
  if (begin_ > 0) {
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == cap_) {
    if (cap_ >= max_line_bytes_ + 2) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ":", line_number_ + 1,
                                                     ": line longer than ",
                                                     max_line_bytes_, " bytes"));
    }
    const size_t new_cap = cap_ * 2;
    auto bigger = std::make_unique_for_overwrite<char[]>(new_cap);
    std::memcpy(bigger.get(), buf_.get(), end_);
    buf_ = std::move(bigger);
    cap_ = new_cap;
  }
  size_t n = 0;
  if (gz_ != nullptr) {
    const int got = gzread(static_cast<gzFile>(gz_), buf_.get() + end_,
                           static_cast<unsigned>(cap_ - end_));
    if (got < 0) {
      int errnum = 0;
      return absl::DataLossError(absl::StrCat(
          path_, ": read error: ", gzerror(static_cast<gzFile>(gz_), &errnum)));
    }
    n = static_cast<size_t>(got);
    if (n == 0) {
      int errnum = 0;
      gzerror(static_cast<gzFile>(gz_), &errnum);
      if (errnum != Z_OK) {
        return absl::DataLossError(
            absl::StrCat(path_, ": gzip stream truncated or corrupt"));
      }
    }
  } else {
    n = std::fread(buf_.get() + end_, 1, cap_ - end_, file_);
    if (n == 0 && std::ferror(file_)) {
      return absl::DataLossError(
          absl::StrCat(path_, ": read error: ", std::strerror(errno)));
    }
  }
  if (n == 0) eof_ = true;
  end_ += n;
  return n;
}

absl::StatusOr<bool> LineReader::Next(std::string_view& line) {
  size_t scan_from = begin_;
  while (true) {
    const void* nl = std::memchr(buf_.get() + scan_from, '\n', end_ - scan_from);
    if (nl != nullptr) {
      const size_t pos = static_cast<const char*>(nl) - buf_.get();
      size_t len = pos - begin_;
      if (len > max_line_bytes_) {
        return absl::InvalidArgumentError(absl::StrCat(path_, ":", line_number_ + 1,
                                                       ": line longer than ",
                                                       max_line_bytes_, " bytes"));
      }
      if (len > 0 && buf_[begin_ + len - 1] == '\r') --len;
      line = std::string_view(buf_.get() + begin_, len);
      begin_ = pos + 1;
      ++line_number_;
      last_terminated_ = true;
      return true;
    }
    const size_t scanned = end_ - begin_;
    auto filled = Fill();
    if (!filled.ok()) return filled.status();
    scan_from = begin_ + scanned;
    if (*filled == 0) {
      if (begin_ == end_) return false;
      size_t len = end_ - begin_;
      if (buf_[begin_ + len - 1] == '\r') --len;
      line = std::string_view(buf_.get() + begin_, len);
      begin_ = end_;
      ++line_number_;
      last_terminated_ = false;
      return true;
    }
  }
}

}  // namespace servesim

#include "sim/base/write_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace servesim {
namespace {

// The registry the signal handler reads: fixed storage, lock-free atomics
// (async-signal-safe), no allocation.
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 registered
  char path[4096] = {};
};
Slot g_slots[kMaxTemporaries];

void RegisterTemporary(const std::string& temporary) {
  if (temporary.size() >= sizeof(Slot::path)) return;
  for (Slot& s : g_slots) {
    int expected = 0;
    if (s.state.compare_exchange_strong(expected, 1)) {
      std::memcpy(s.path, temporary.c_str(), temporary.size() + 1);
      s.state.store(2);
      return;
    }
  }
}

extern "C" void RemoveTemporariesAndDie(int sig) {
  for (Slot& s : g_slots) {
    if (s.state.load() == 2) ::unlink(s.path);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

std::string Reason(int err) { return err != 0 ? std::strerror(err) : "unknown error"; }

absl::Status WriteError(const std::string& path, int err) {
  return absl::DataLossError(absl::StrCat(path, ": cannot write: ", Reason(err)));
}

// Writes all of `text` to `f` and closes it; the errno of the first failure
// (0 when none).
int WriteAndClose(std::FILE* f, std::string_view text) {
  int err = 0;
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), f) != text.size())
    err = errno != 0 ? errno : EIO;
  if (std::fflush(f) != 0 && err == 0) err = errno != 0 ? errno : EIO;
  if (std::fclose(f) != 0 && err == 0) err = errno != 0 ? errno : EIO;
  return err;
}

}  // namespace

absl::Status CreateTemporaryBeside(const std::string& path, TemporaryFile* out) {
  static std::atomic<uint64_t> counter{0};
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  int fd = -1;
  std::string tmp;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = absl::StrCat(dir, ".", base, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        path, ": cannot write (a temporary file in its folder): ", Reason(errno)));
  }
  RegisterTemporary(tmp);
  out->fd = fd;
  out->path = std::move(tmp);
  return absl::OkStatus();
}

void UnregisterTemporary(const std::string& temporary) {
  for (Slot& s : g_slots) {
    if (s.state.load() == 2 && temporary == s.path) {
      s.state.store(0);
      return;
    }
  }
}

void RemoveTemporariesOnSignals() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const int sig : {SIGINT, SIGTERM}) {
      struct sigaction old = {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) {
        continue;  // ignored (nohup, a background job) or handled already
      }
      struct sigaction sa = {};
      sa.sa_handler = RemoveTemporariesAndDie;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

absl::Status WriteFileWhole(const std::string& given, std::string_view text) {
  // Through a symlink: replace its target, not the link.
  std::string path = given;
  struct stat lst = {};
  char resolved[PATH_MAX];
  if (::lstat(given.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode) &&
      ::realpath(given.c_str(), resolved) != nullptr) {
    path = resolved;
  }
  struct stat st = {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {  // /dev/stdout, a FIFO: in place
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return WriteError(path, errno);
    const int err = WriteAndClose(f, text);
    return err == 0 ? absl::OkStatus() : WriteError(path, err);
  }
  TemporaryFile t;
  if (absl::Status s = CreateTemporaryBeside(path, &t); !s.ok()) return s;
  if (exists) (void)::fchmod(t.fd, st.st_mode & 07777);  // keeps the target's mode
  auto discard = [&t](int err, const std::string& what) {
    ::unlink(t.path.c_str());
    UnregisterTemporary(t.path);
    return absl::DataLossError(absl::StrCat(what, Reason(err)));
  };
  std::FILE* f = ::fdopen(t.fd, "wb");
  if (f == nullptr) {
    const int err = errno;
    ::close(t.fd);
    return discard(err, absl::StrCat(path, ": cannot write: "));
  }
  if (const int err = WriteAndClose(f, text); err != 0)
    return discard(err, absl::StrCat(path, ": cannot write: "));
  if (std::rename(t.path.c_str(), path.c_str()) != 0) {
    return discard(errno, absl::StrCat(path, ": cannot replace it with ", t.path, ": "));
  }
  UnregisterTemporary(t.path);
  return absl::OkStatus();
}

}  // namespace servesim

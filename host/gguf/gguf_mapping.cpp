// Mapping: a whole file mapped read-only, the storage behind File::open; File::open and
// File::detach, the file's hold on its mapping.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <new>
#include <string>
#include <system_error>

#include "host/gguf/gguf_file.h"
#include "host/gguf/gguf_format.h"

namespace dfsel::gguf {

Mapping::~Mapping() {
  if (addr_) munmap(addr_, size_);
}

Mapping::Mapping(Mapping&& other) noexcept : addr_(other.addr_), size_(other.size_) {
  other.addr_ = nullptr;
  other.size_ = 0;
}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (addr_) munmap(addr_, size_);
    addr_ = other.addr_;
    size_ = other.size_;
    other.addr_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

namespace {

const char* file_kind(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

// Judged before it is opened: opening a FIFO for reading waits for a writer, forever if none
// comes. O_NONBLOCK covers a path swapped for one between the stat and the open.
Status Mapping::map(const std::string& path, Mapping* out) {
  struct stat before;
  if (::stat(path.c_str(), &before) != 0)
    return Status{DFSEL_IO_ERROR, cat("cannot open: ", std::generic_category().message(errno))};
  if (!S_ISREG(before.st_mode))
    return Status{DFSEL_IO_ERROR, cat("is ", file_kind(before.st_mode), ", not a regular file")};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Status{DFSEL_IO_ERROR, cat("cannot open: ", std::generic_category().message(errno))};
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status{DFSEL_IO_ERROR, cat("cannot stat: ", std::generic_category().message(err))};
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status{DFSEL_IO_ERROR, cat("is ", file_kind(st.st_mode), ", not a regular file")};
  }
  Mapping m;
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ > 0) {  // an empty file has nothing to map; the parser reports it as truncated
    void* p = mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Status{DFSEL_IO_ERROR,
                    cat("cannot map ", m.size_, " bytes: ", std::generic_category().message(err))};
    }
    m.addr_ = p;
  }
  ::close(fd);
  *out = std::move(m);
  return Status::success();
}

void File::detach() {
  header_copy_.assign(data_, data_ + data_offset_);
  data_ = header_copy_.data();
  map_ = Mapping();
}

Status File::open(const std::string& path, File* out) {
  try {
    Mapping m;
    Status s = Mapping::map(path, &m);
    if (s.ok()) {
      File f;
      s = parse(m.data(), m.size(), &f);
      if (s.ok()) {
        f.map_ = std::move(m);
        *out = std::move(f);
        return s;
      }
    }
    s.msg = path + ": " + s.msg;
    return s;
  } catch (const std::bad_alloc&) {
    return Status{DFSEL_OUT_OF_MEMORY, path + ": out of memory"};
  }
}

}  // namespace dfsel::gguf

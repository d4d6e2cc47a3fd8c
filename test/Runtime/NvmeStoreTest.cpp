//===- NvmeStoreTest.cpp - The NVMe tier's file ---------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The oracle is a byte vector shadowing the file: every lane (io_uring or
// pread/pwrite, O_DIRECT or the page cache, any block size and queue depth)
// must read back exactly what the shadow holds after unaligned writes that
// overlap each other. Errors must name the directory or file and the number.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/NvmeStore.h"

#include "dsc/Runtime/Error.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace dsc::rt;

namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

std::vector<char> randomBytes(uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<char> bytes(n);
  for (char &c : bytes)
    c = char(rng());
  return bytes;
}

/// Runs `body`, which must throw Error whose message holds every one of
/// `parts`.
void expectErrorWith(const std::function<void()> &body,
                     std::initializer_list<std::string> parts) {
  try {
    body();
  } catch (const Error &e) {
    std::string what = e.what();
    for (const std::string &part : parts)
      EXPECT_NE(what.find(part), std::string::npos)
          << "message \"" << what << "\" lacks \"" << part << "\"";
    return;
  }
  ADD_FAILURE() << "no dsc::rt::Error thrown";
}

bool exists(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

/// A fresh directory per test, removed with whatever is left in it.
class NvmeStoreTestBase {
protected:
  NvmeStoreTestBase() {
    std::string pattern = ::testing::TempDir() + "dsc-nvme-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()))
      dir = buf.data();
  }
  ~NvmeStoreTestBase() {
    if (dir.empty())
      return;
    ::chmod(dir.c_str(), 0755);
    if (DIR *d = ::opendir(dir.c_str())) {
      while (dirent *e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == "..")
          continue;
        std::string path = dir + "/" + name;
        ::chmod(path.c_str(), 0755);
        if (::rmdir(path.c_str()) != 0)
          ::unlink(path.c_str());
      }
      ::closedir(d);
    }
    ::rmdir(dir.c_str());
  }
  /// How many entries the directory holds besides . and ..
  int entries() const {
    int n = 0;
    if (DIR *d = ::opendir(dir.c_str())) {
      while (dirent *e = ::readdir(d))
        n += std::strcmp(e->d_name, ".") != 0 &&
             std::strcmp(e->d_name, "..") != 0;
      ::closedir(d);
    }
    return n;
  }
  std::string dir;
};

class NvmeStoreTest : public NvmeStoreTestBase, public ::testing::Test {
protected:
  void SetUp() override { ASSERT_FALSE(dir.empty()) << "mkdtemp failed"; }
};

/// (useIoUring, useDirectIo)
class NvmeStoreLaneTest
    : public NvmeStoreTestBase,
      public ::testing::TestWithParam<std::tuple<bool, bool>> {
protected:
  void SetUp() override { ASSERT_FALSE(dir.empty()) << "mkdtemp failed"; }
  NvmeOptions options() const {
    NvmeOptions o;
    o.useIoUring = std::get<0>(GetParam());
    o.useDirectIo = std::get<1>(GetParam());
    return o;
  }
};

/// Writes random bytes to [offset, offset+len) of the store and the shadow,
/// and reads the range back.
void writeAndCheck(NvmeStore &store, std::vector<char> &shadow, uint64_t offset,
                   uint64_t len, uint64_t seed) {
  std::vector<char> data = randomBytes(len, seed);
  store.write(offset, data.data(), len);
  std::memcpy(shadow.data() + offset, data.data(), len);
  // One byte more on each side so that an unaligned destination is used too.
  std::vector<char> back(len + 2, 0x5a);
  store.read(offset, back.data() + 1, len);
  EXPECT_EQ(back.front(), 0x5a);
  EXPECT_EQ(back.back(), 0x5a);
  EXPECT_EQ(0, std::memcmp(back.data() + 1, data.data(), len))
      << "range [" << offset << ", " << offset + len << ") read back wrong";
}

void expectFileEquals(NvmeStore &store, const std::vector<char> &shadow) {
  std::vector<char> whole(shadow.size());
  store.read(0, whole.data(), whole.size());
  ASSERT_EQ(whole.size(), shadow.size());
  for (size_t i = 0; i < whole.size(); ++i)
    if (whole[i] != shadow[i]) {
      ADD_FAILURE() << "byte " << i << " of " << store.path() << " is "
                    << int(whole[i]) << ", expected " << int(shadow[i]);
      return;
    }
}

} // namespace

TEST_P(NvmeStoreLaneTest, UnalignedRoundTrip) {
  const uint64_t size = 8 * kMiB + 777;
  NvmeStore store(dir, "arena.nvme", size, options());
  std::cout << "[ lane     ] useIoUring=" << std::get<0>(GetParam())
            << " useDirectIo=" << std::get<1>(GetParam())
            << ": engine=" << store.engine() << " directIo=" << store.directIo()
            << "\n";
  if (!std::get<0>(GetParam())) {
    EXPECT_STREQ(store.engine(), "pread/pwrite");
  }
  if (!std::get<1>(GetParam())) {
    EXPECT_FALSE(store.directIo());
  }
  std::vector<char> shadow(size, 0);
  struct Range {
    uint64_t offset, len;
  };
  const Range ranges[] = {
      {0, 1},
      {1, 1},
      {4095, 1},
      {4096, 4095},
      {17, 4097},
      {511, 3 * kMiB + 13},
      {8191, 2},
      {kMiB - 3, 2 * kMiB + 7}, // crosses the 3 MiB range written above
      {size - 1, 1},
      {size - 5000, 5000},
      {4 * kMiB, kMiB}, // aligned, one whole block
  };
  uint64_t seed = 1;
  for (const Range &r : ranges)
    writeAndCheck(store, shadow, r.offset, r.len, seed++);
  expectFileEquals(store, shadow);
}

TEST_P(NvmeStoreLaneTest, OverlappingWriteKeepsNeighbours) {
  const uint64_t size = 6 * 4096 + 100;
  NvmeStore store(dir, "arena.nvme", size, options());
  std::vector<char> shadow(size, 0);
  writeAndCheck(store, shadow, 0, size, 7);
  // Ranges that start and end inside blocks, within one block, and across
  // block boundaries: the rest of each block they touch must survive.
  writeAndCheck(store, shadow, 4000, 200, 8);
  writeAndCheck(store, shadow, 5000, 10, 9);
  writeAndCheck(store, shadow, 8190, 4, 10);
  writeAndCheck(store, shadow, 3 * 4096 - 1, 4096 + 2, 11);
  writeAndCheck(store, shadow, size - 150, 149, 12);
  expectFileEquals(store, shadow);
  // A range read alone, after everything around it changed.
  std::vector<char> mid(300);
  store.read(4050, mid.data(), mid.size());
  EXPECT_EQ(0, std::memcmp(mid.data(), shadow.data() + 4050, mid.size()));
}

TEST_P(NvmeStoreLaneTest, FreshStoreReadsZeros) {
  const uint64_t size = 3 * 4096 + 5;
  NvmeStore store(dir, "arena.nvme", size, options());
  std::vector<char> bytes(size, 1);
  store.read(0, bytes.data(), size);
  for (uint64_t i = 0; i < size; ++i)
    if (bytes[i] != 0) {
      ADD_FAILURE() << "byte " << i << " of a fresh store is not zero";
      break;
    }
  char last = 1;
  store.read(size - 1, &last, 1);
  EXPECT_EQ(last, 0);
}

TEST_P(NvmeStoreLaneTest, BlockSizesAndQueueDepthsAgree) {
  const uint64_t size = 200 * 1024 + 3;
  std::vector<char> first;
  for (std::pair<uint64_t, int> shape :
       {std::pair<uint64_t, int>{4096, 1}, {4096, 3}, {1000, 2}, {kMiB, 8}}) {
    NvmeOptions o = options();
    o.blockBytes = shape.first;
    o.queueDepth = shape.second;
    NvmeStore store(dir, "arena.nvme", size, o);
    std::vector<char> shadow(size, 0);
    writeAndCheck(store, shadow, 3, 50000, 21);
    writeAndCheck(store, shadow, 40000, 100000, 22);
    writeAndCheck(store, shadow, 150001, 50000, 23);
    expectFileEquals(store, shadow);
    std::vector<char> whole(size);
    store.read(0, whole.data(), size);
    if (first.empty())
      first = whole;
    else
      EXPECT_EQ(whole, first)
          << "blockBytes " << shape.first << " queueDepth " << shape.second;
  }
}

TEST_P(NvmeStoreLaneTest, ShortReadIsAnErrorNamingTheRange) {
  NvmeStore store(dir, "arena.nvme", 64 * 1024, options());
  // The file shrinks behind the store's back. Into the middle of a read:
  // the first transfer comes back short and its remainder hits end of file.
  ASSERT_EQ(::truncate(store.path().c_str(), 10000), 0);
  std::vector<char> bytes(10000);
  expectErrorWith([&] { store.read(5000, bytes.data(), bytes.size()); },
                  {"'" + store.path() + "'", "read of 10000 bytes",
                   "offset 5000", "end of file"});
  // Before a read: nothing comes back at all.
  ASSERT_EQ(::truncate(store.path().c_str(), 0), 0);
  expectErrorWith([&] { store.read(1234, bytes.data(), 5000); },
                  {"'" + store.path() + "'", "read of 5000 bytes",
                   "offset 1234", "end of file"});
}

TEST_P(NvmeStoreLaneTest, OsErrorNamesTheRange) {
  NvmeStore store(dir, "arena.nvme", 64 * 1024, options());
  // Swap the store's descriptor for a read-only one of the same file: reads
  // still work, every write fails with EBADF.
  int storeFd = -1;
  if (DIR *d = ::opendir("/proc/self/fd")) {
    while (dirent *e = ::readdir(d)) {
      char target[4096];
      std::string link = std::string("/proc/self/fd/") + e->d_name;
      ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
      if (n > 0 && std::string(target, size_t(n)) == store.path())
        storeFd = std::atoi(e->d_name);
    }
    ::closedir(d);
  }
  ASSERT_GE(storeFd, 0) << "no descriptor of " << store.path();
  int readOnly = ::open(store.path().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(readOnly, 0);
  ASSERT_EQ(::dup2(readOnly, storeFd), storeFd);
  ::close(readOnly);
  std::vector<char> bytes = randomBytes(20000, 3);
  expectErrorWith([&] { store.write(777, bytes.data(), bytes.size()); },
                  {"'" + store.path() + "'", "write of 20000 bytes",
                   "offset 777", std::strerror(EBADF)});
  EXPECT_EQ(store.stats().bytesWritten, 0u);
  char byte = 1;
  store.read(50000, &byte, 1);
  EXPECT_EQ(byte, 0);
}

TEST_P(NvmeStoreLaneTest, StatsCountBytes) {
  NvmeStore store(dir, "arena.nvme", 10000, options());
  std::vector<char> bytes = randomBytes(3000, 5);
  store.write(100, bytes.data(), 3000);
  store.write(5000, bytes.data(), 1000);
  store.read(0, bytes.data(), 2000);
  EXPECT_EQ(store.stats().bytesWritten, 4000u);
  EXPECT_EQ(store.stats().bytesRead, 2000u);
  EXPECT_GT(store.stats().writeSeconds, 0.0);
  EXPECT_GT(store.stats().readSeconds, 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Lanes, NvmeStoreLaneTest,
    ::testing::Combine(::testing::Bool(), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<bool, bool>> &info) {
      return std::string(std::get<0>(info.param) ? "IoUring" : "Pread") +
             (std::get<1>(info.param) ? "Direct" : "Buffered");
    });

TEST_F(NvmeStoreTest, MissingDirectory) {
  std::string missing = dir + "/no-such-dir";
  expectErrorWith([&] { NvmeStore(missing, "arena.nvme", 4096); },
                  {"nvme-path '" + missing + "' does not exist"});
  EXPECT_FALSE(exists(missing + "/arena.nvme"));
}

TEST_F(NvmeStoreTest, FileInsteadOfDirectory) {
  std::string file = dir + "/a-file";
  std::ofstream(file) << "x";
  expectErrorWith([&] { NvmeStore(file, "arena.nvme", 4096); },
                  {"nvme-path '" + file + "' does not exist"});
  EXPECT_EQ(entries(), 1);
}

TEST_F(NvmeStoreTest, ReadOnlyDirectory) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root ignores directory permissions";
  std::string ro = dir + "/read-only";
  ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
  expectErrorWith(
      [&] { NvmeStore(ro, "arena.nvme", 4096); },
      {"nvme-path '" + ro + "' is not writable: ", std::strerror(EACCES)});
  EXPECT_FALSE(exists(ro + "/arena.nvme"));
}

TEST_F(NvmeStoreTest, MoreThanTheFileSystemHolds) {
  const uint64_t huge = uint64_t(1) << 60;
  expectErrorWith(
      [&] { NvmeStore(dir, "arena.nvme", huge); },
      {"nvme-path '" + dir + "'", std::to_string(huge), "bytes free"});
  EXPECT_EQ(entries(), 0) << "a refused store left a file behind";
}

TEST_F(NvmeStoreTest, OutOfRangeIsRefusedBeforeAnyIo) {
  NvmeStore store(dir, "arena.nvme", 10000);
  std::vector<char> bytes(16, 3);
  expectErrorWith([&] { store.read(9999, bytes.data(), 2); },
                  {"'" + store.path() + "'", "read of 2 bytes", "offset 9999",
                   "10000 bytes"});
  expectErrorWith(
      [&] { store.write(10000, bytes.data(), 1); },
      {"'" + store.path() + "'", "write of 1 bytes", "offset 10000"});
  // offset + bytes wraps around.
  expectErrorWith([&] { store.read(UINT64_MAX, bytes.data(), 2); },
                  {"offset " + std::to_string(UINT64_MAX)});
  EXPECT_EQ(store.stats().bytesRead, 0u);
  EXPECT_EQ(store.stats().bytesWritten, 0u);
  // The refused write changed nothing.
  char last = 1;
  store.read(9999, &last, 1);
  EXPECT_EQ(last, 0);
}

TEST_F(NvmeStoreTest, BadOptionsAndFileName) {
  NvmeOptions o;
  o.queueDepth = 0;
  expectErrorWith([&] { NvmeStore(dir, "arena.nvme", 4096, o); },
                  {"queue depth 0"});
  o = NvmeOptions();
  o.blockBytes = 0;
  expectErrorWith([&] { NvmeStore(dir, "arena.nvme", 4096, o); },
                  {"block size 0"});
  expectErrorWith([&] { NvmeStore(dir, "sub/arena.nvme", 4096); },
                  {"'sub/arena.nvme'", dir});
  EXPECT_EQ(entries(), 0);
}

TEST_F(NvmeStoreTest, DestructorRemovesTheFile) {
  std::string path;
  {
    NvmeStore store(dir, "arena.nvme", 3 * kMiB + 1);
    path = store.path();
    EXPECT_EQ(path, dir + "/arena.nvme");
    EXPECT_EQ(store.size(), 3 * kMiB + 1);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_GE(uint64_t(st.st_size), store.size());
    // Preallocated, not sparse: a full disk fails at construction.
    EXPECT_GE(uint64_t(st.st_blocks) * 512, store.size());
  }
  EXPECT_FALSE(exists(path));
  EXPECT_EQ(entries(), 0);
}

TEST_F(NvmeStoreTest, OldFileIsTruncated) {
  std::string path = dir + "/arena.nvme";
  std::ofstream(path) << std::string(10000, 'x');
  NvmeStore store(dir, "arena.nvme", 8192);
  std::vector<char> bytes(8192, 1);
  store.read(0, bytes.data(), bytes.size());
  EXPECT_EQ(bytes, std::vector<char>(8192, 0));
}

TEST_F(NvmeStoreTest, MovedStoreOwnsTheFile) {
  std::string path;
  {
    NvmeStore moved(dir, "arena.nvme", 8192);
    path = moved.path();
    char byte = 42;
    moved.write(4097, &byte, 1);
    NvmeStore store(std::move(moved));
    byte = 0;
    store.read(4097, &byte, 1);
    EXPECT_EQ(byte, 42);
  }
  EXPECT_FALSE(exists(path));
}

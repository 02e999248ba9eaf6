// io/stale_temporaries: the sweep removes a temporary only when its liveness lock is free and it
// has been left unchanged for the margin, whatever host or process its name gives; the lock a
// writer takes (hold_liveness_lock) is the one the sweep tests, and goes when its descriptor is
// closed; which file systems share locks between hosts (issue 52, item 1).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "io/stale_temporaries.hpp"
#include "support/harness.hpp"

namespace blockmm::io {
namespace {

using e2e::date_back;
using e2e::list_dir;
using e2e::ScratchDir;
using e2e::write_text;

TEST(StaleTemporaries, OnlyFileSystemsThatShowLocksToEveryHostAreSwept) {
  for (const char* local : {"ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs"})
    EXPECT_TRUE(locks_shared_between_hosts(local, "rw,relatime")) << local;
  EXPECT_TRUE(locks_shared_between_hosts("nfs", "rw,vers=3,hard,proto=tcp,local_lock=none"));
  EXPECT_TRUE(locks_shared_between_hosts("nfs4", "rw,vers=4.2,local_lock=none"));
  EXPECT_TRUE(locks_shared_between_hosts("nfs", "rw,local_lock=flock"));  // flock(2) only: fcntl locks reach the server
  EXPECT_FALSE(locks_shared_between_hosts("nfs", "rw,vers=3,nolock,local_lock=all"));
  EXPECT_FALSE(locks_shared_between_hosts("nfs", "rw,vers=3,local_lock=posix"));
  EXPECT_TRUE(locks_shared_between_hosts("lustre", "rw,flock,lazystatfs"));
  EXPECT_FALSE(locks_shared_between_hosts("lustre", "rw,localflock"));
  EXPECT_FALSE(locks_shared_between_hosts("lustre", "rw,lazystatfs"));  // not said: perhaps noflock
  EXPECT_TRUE(locks_shared_between_hosts("cifs", "rw,vers=3.1.1"));
  EXPECT_FALSE(locks_shared_between_hosts("cifs", "rw,nobrl"));
  for (const char* unknown : {"fuse.sshfs", "9p", "beegfs", "virtiofs", ""})
    EXPECT_FALSE(locks_shared_between_hosts(unknown, "rw")) << unknown;
}

TEST(StaleTemporaries, AFreeLockAndTheMarginDecideNotTheNameOrTheProcess) {
  ScratchDir dir("blockmm-stale");
  const std::string d = dir.path();
  const std::string me = std::to_string(::getpid());
  const auto make = [&](const std::string& name, long age) {
    write_text(d + "/" + name, "partial\n");
    EXPECT_TRUE(date_back(d + "/" + name, age)) << name;
  };
  // Dead (no lock, old): another host's, this host's of a process that is gone, a hashed long name.
  const std::vector<std::string> dead = {".C.bin.blockmm-tmp.node1.123.abcdef",
                                         ".C.h5.blockmm-tmp.here.999999999.Zz09aa",
                                         ".C.h5.part-0a1b2c3d-0001.blockmm-tmp.node-2_x.4.ABCDEF"};
  for (const std::string& name : dead) make(name, 700);
  // Kept: recent; locked (a live run, here in this very process through another descriptor);
  // this host's live process; names that are not temporaries'.
  make(".C.bin.blockmm-tmp.node1.123.recent", 30);
  make(".C.bin.blockmm-tmp.node1.123.locked", 700);
  make(".C.bin.blockmm-tmp.here." + me + ".mine00", 700);
  const std::vector<std::string> strangers = {
      ".C.bin.blockmm-tmp.node1.123.abcde",   "C.bin.blockmm-tmp.node1.123.abcdef",
      ".C.bin.blockmm-tmp.no.de.123.abcdef",  "..blockmm-tmp.node1.123.abcdef",
      ".C.bin.blockmm-tmp..123.abcdef",       ".C.bin.blockmm-tmp.node1.x123.abcdef"};
  for (const std::string& name : strangers) make(name, 700);
  const int held = ::open((d + "/.C.bin.blockmm-tmp.node1.123.locked").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_TRUE(hold_liveness_lock(held));

  remove_stale_temporaries(d, "here");
  std::vector<std::string> expected = {".C.bin.blockmm-tmp.here." + me + ".mine00",
                                       ".C.bin.blockmm-tmp.node1.123.locked", ".C.bin.blockmm-tmp.node1.123.recent"};
  expected.insert(expected.end(), strangers.begin(), strangers.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(list_dir(d), expected);

  // Its holder gone (the descriptor closed, as when a process dies), the lock is free.
  ::close(held);
  remove_stale_temporaries(d, "here");
  expected.erase(std::find(expected.begin(), expected.end(), ".C.bin.blockmm-tmp.node1.123.locked"));
  EXPECT_EQ(list_dir(d), expected);
}

}  // namespace
}  // namespace blockmm::io

// io/stale_temporaries: the sweep removes a temporary only when its name is marked as held by its
// liveness lock, the lock is free and it has been left unchanged for the margin, whatever host or
// process its name gives; the lock a writer takes (hold_liveness_lock) is the one the sweep tests,
// and goes when its descriptor is closed; a temporary whose lock cannot be taken is not marked;
// which file systems share locks between hosts (issue 52, item 1, and its review).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "io/atomic_output.hpp"
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

TEST(StaleTemporaries, NamesTellTheLockedFormFromTheUnmarkedOne) {
  const TemporaryName locked = parse_temporary_name(".C.bin.blockmm-tmp.lk.node1.123.abcdef");
  EXPECT_TRUE(locked.locked);
  EXPECT_EQ(locked.host, "node1");
  EXPECT_EQ(locked.pid, 123);
  const TemporaryName plain = parse_temporary_name(".C.bin.blockmm-tmp.node1.123.abcdef");
  EXPECT_FALSE(plain.locked);
  EXPECT_EQ(plain.host, "node1");
  EXPECT_EQ(plain.pid, 123);
  // A host tagged "lk", unmarked; an output named like a temporary, marked or not.
  EXPECT_FALSE(parse_temporary_name(".C.bin.blockmm-tmp.lk.123.abcdef").locked);
  EXPECT_EQ(parse_temporary_name(".C.bin.blockmm-tmp.lk.123.abcdef").host, "lk");
  EXPECT_TRUE(parse_temporary_name(".x.blockmm-tmp.lk.blockmm-tmp.lk.h.1.abcdef").locked);
  EXPECT_FALSE(parse_temporary_name(".x.blockmm-tmp.lk.blockmm-tmp.h.1.abcdef").locked);
  for (const char* stranger : {".C.bin.blockmm-tmp.lk.node1.123.abcde", ".blockmm-tmp.lk.node1.123.abcdef",
                               ".C.bin.blockmm-tmpXlk.node1.123.abcdef", ".C.bin.blockmm-tmp.lk..123.abcdef"})
    EXPECT_EQ(parse_temporary_name(stranger).pid, -1) << stranger;
}

// A process that sleeps until it is killed: a live pid of this host that is not the test's own
// (the sweep never asks kill() about its own pid).
class Sleeper {
 public:
  Sleeper() : pid_(::fork()) {
    if (pid_ == 0) {
      for (;;) ::pause();
    }
  }
  ~Sleeper() { end(); }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
  pid_t pid() const { return pid_; }
  void end() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_;
};

TEST(StaleTemporaries, AFreeLockAndTheMarginDecideNotTheNameOrTheProcess) {
  ScratchDir dir("blockmm-stale");
  const std::string d = dir.path();
  if (!folder_shares_locks(d))
    GTEST_SKIP() << d << ": its file system is not one known to show locks to every host (9p, FUSE, ...): "
                 << "the sweep removes nothing there (set TMPDIR to a local file system to run this)";
  Sleeper sleeper;
  ASSERT_GT(sleeper.pid(), 0);
  const std::string live = std::to_string(sleeper.pid());
  const auto make = [&](const std::string& name, long age) {
    write_text(d + "/" + name, "partial\n");
    EXPECT_TRUE(date_back(d + "/" + name, age)) << name;
  };
  // Dead (marked, no lock, old): another host's, this host's of a process that is gone, a hashed long name.
  const std::vector<std::string> dead = {".C.bin.blockmm-tmp.lk.node1.123.abcdef",
                                         ".C.h5.blockmm-tmp.lk.here.999999999.Zz09aa",
                                         ".C.h5.part-0a1b2c3d-0001.blockmm-tmp.lk.node-2_x.4.ABCDEF"};
  for (const std::string& name : dead) make(name, 700);
  // Kept: recent; locked (a live run, here in this very process through another descriptor);
  // this host's live process (the sleeper); unmarked ones, whose creator took no lock (a blockmm
  // from before the lock, on any host, or a run whose lock was refused); names that are not
  // temporaries'.
  make(".C.bin.blockmm-tmp.lk.node1.123.recent", 30);
  make(".C.bin.blockmm-tmp.lk.node1.123.locked", 700);
  make(".C.bin.blockmm-tmp.lk.here." + live + ".sleeps", 700);
  const std::vector<std::string> unmarked = {".C.bin.blockmm-tmp.node1.123.oldrun",
                                             ".C.bin.blockmm-tmp.here.999999999.oldrun"};
  for (const std::string& name : unmarked) make(name, 700);
  const std::vector<std::string> strangers = {
      ".C.bin.blockmm-tmp.lk.node1.123.abcde",  "C.bin.blockmm-tmp.lk.node1.123.abcdef",
      ".C.bin.blockmm-tmp.lk.no.de.123.abcdef", "..blockmm-tmp.lk.node1.123.abcdef",
      ".C.bin.blockmm-tmp.lk..123.abcdef",      ".C.bin.blockmm-tmp.lk.node1.x123.abcdef"};
  for (const std::string& name : strangers) make(name, 700);
  const int held = ::open((d + "/.C.bin.blockmm-tmp.lk.node1.123.locked").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_TRUE(hold_liveness_lock(held));

  remove_stale_temporaries(d, "here");
  std::vector<std::string> expected = {".C.bin.blockmm-tmp.lk.here." + live + ".sleeps",
                                       ".C.bin.blockmm-tmp.lk.node1.123.locked",
                                       ".C.bin.blockmm-tmp.lk.node1.123.recent"};
  expected.insert(expected.end(), unmarked.begin(), unmarked.end());
  expected.insert(expected.end(), strangers.begin(), strangers.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(list_dir(d), expected);

  // Its holder gone (the descriptor closed, as when a process dies), the lock is free; the
  // sleeper gone, its pid names no process here.
  ::close(held);
  sleeper.end();
  remove_stale_temporaries(d, "here");
  for (const std::string& gone : std::vector<std::string>{".C.bin.blockmm-tmp.lk.node1.123.locked",
                                                           ".C.bin.blockmm-tmp.lk.here." + live + ".sleeps"})
    expected.erase(std::find(expected.begin(), expected.end(), gone));
  EXPECT_EQ(list_dir(d), expected);
}

bool refuse_lock(int) { return false; }

// The temporary holds its lock under the marked name; where the lock cannot be taken (a file
// system without locks, ENOLCK on NFS) it takes the unmarked name, which no sweep removes, and
// no marked file is left without its lock.
TEST(StaleTemporaries, ATemporaryIsMarkedOnlyWhereItHoldsItsLock) {
  ScratchDir dir("blockmm-stale");
  const std::string target = dir / "C.bin";
  const CreatedTemporary locked = create_temporary(target, "here", 42);
  ASSERT_GE(locked.fd, 0);
  EXPECT_TRUE(locked.locked);
  EXPECT_EQ(locked.path.rfind(dir / ".C.bin.blockmm-tmp.lk.here.42.", 0), 0u) << locked.path;
  EXPECT_TRUE(parse_temporary_name(locked.path.substr(dir.path().size() + 1)).locked);
  struct flock probe {};
  probe.l_type = F_RDLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = kLivenessLockOffset;
  probe.l_len = 1;
  const int other = ::open(locked.path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(other, 0);
  EXPECT_EQ(::fcntl(other, F_OFD_SETLK, &probe), -1) << "the marked temporary's lock is not held";
  ::close(other);
  ::close(locked.fd);
  ::unlink(locked.path.c_str());
  disarm_temporary_cleanup(locked.cleanup_slot);

  const CreatedTemporary plain = create_temporary(target, "here", 42, refuse_lock);
  ASSERT_GE(plain.fd, 0);
  EXPECT_FALSE(plain.locked);
  EXPECT_EQ(plain.path.rfind(dir / ".C.bin.blockmm-tmp.here.42.", 0), 0u) << plain.path;
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{plain.path.substr(dir.path().size() + 1)})
      << "the marked file whose lock was refused is left";
  ::close(plain.fd);
  // Armed for the signal handlers from before it existed: the handlers' removal takes it.
  ASSERT_GE(plain.cleanup_slot, 0);
  remove_temporary_from_signal_handler();
  EXPECT_TRUE(list_dir(dir.path()).empty()) << "the temporary was not armed for the signal handlers";
  disarm_temporary_cleanup(plain.cleanup_slot);
}

}  // namespace
}  // namespace blockmm::io

// Filesystem isolation of a child (ProcessOptions::filesystem_isolation, Landlock): the child tree writes
// only its writable directories; everything else stays readable and unchanged; how it was applied is
// reported; a run that requires it refuses to start unisolated.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include <gtest/gtest.h>

#include "exec_test_util.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using exec_test::Sh;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

bool Supported() { return FilesystemIsolationSupport().rfind("landlock", 0) == 0; }

ProcessOptions Isolated(const std::string& script, const std::filesystem::path& writable) {
  ProcessOptions o = Sh(script);
  o.filesystem_isolation = FilesystemIsolation{{writable}, false, std::nullopt};
  return o;
}

TEST(FilesystemIsolation, WritesOutsideTheWritableDirsFailAndNothingChanges) {
  if (!Supported()) GTEST_SKIP() << FilesystemIsolationSupport();
  TempDir tmp;
  const auto work = tmp.path() / "work";
  const auto outside = tmp.path() / "outside";
  std::filesystem::create_directories(work);
  std::filesystem::create_directories(outside / "sub");
  WriteFile(outside / "db.sqlite3", "precious");
  // Every kind of change: append, truncate, create, mkdir, rename, remove, symlink; then the allowed ones.
  const std::string script =
      "o=" + outside.string() + "; w=" + work.string() + "\n"
      "echo x >> $o/db.sqlite3 && echo APPEND-OK\n"
      "true > $o/db.sqlite3 && echo TRUNC-OK\n"
      "echo x > $o/new.txt && echo CREATE-OK\n"
      "mkdir $o/newdir && echo MKDIR-OK\n"
      "mv $o/db.sqlite3 $o/moved && echo RENAME-OK\n"
      "rmdir $o/sub && echo RMDIR-OK\n"
      "ln -s /etc/passwd $o/link && echo SYMLINK-OK\n"
      "cat $o/db.sqlite3 > /dev/null && echo READ-OK\n"
      "echo y > /dev/null && echo DEVNULL-OK\n"
      "echo z > $w/out.txt && mkdir $w/d && mv $w/out.txt $w/d/ && echo WORK-OK\n";
  ProcessRun r = RunProcess(Isolated(script, work));
  ASSERT_EQ(r.reason, TerminationReason::kExited) << r.result.stderr_text;
  EXPECT_EQ(r.isolation.rfind("landlock (ABI ", 0), 0u) << r.isolation;
  const std::string& out = r.result.stdout_text;
  for (const char* denied : {"APPEND-OK", "TRUNC-OK", "CREATE-OK", "MKDIR-OK", "RENAME-OK", "RMDIR-OK", "SYMLINK-OK"}) {
    EXPECT_EQ(out.find(denied), std::string::npos) << denied << "\n" << out << r.result.stderr_text;
  }
  EXPECT_NE(out.find("READ-OK"), std::string::npos) << r.result.stderr_text;
  EXPECT_NE(out.find("DEVNULL-OK"), std::string::npos) << r.result.stderr_text;
  EXPECT_NE(out.find("WORK-OK"), std::string::npos) << r.result.stderr_text;
  EXPECT_NE(r.result.stderr_text.find("Permission denied"), std::string::npos);
  // Nothing outside changed.
  EXPECT_EQ(ReadFile(outside / "db.sqlite3"), "precious");
  EXPECT_TRUE(std::filesystem::is_directory(outside / "sub"));
  int entries = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(outside)) ++entries;
  EXPECT_EQ(entries, 2);
  EXPECT_EQ(ReadFile(work / "d" / "out.txt"), "z\n");
  EXPECT_EQ(r.ToJson()["isolation"], r.isolation);
}

TEST(FilesystemIsolation, GrandchildrenInheritItAndTheControlRunCanWrite) {
  if (!Supported()) GTEST_SKIP() << FilesystemIsolationSupport();
  TempDir tmp;
  const auto target = tmp.path() / "victim.txt";
  WriteFile(target, "before");
  // A double-forked python grandchild tries to write.
  const std::string script = "( /usr/bin/python3 -c \"open('" + target.string() +
                             "', 'w').write('after')\" & ) ; sleep 0.5";
  ProcessRun isolated = RunProcess(Isolated(script, tmp.path() / "nowhere"));
  EXPECT_NE(isolated.result.stderr_text.find("PermissionError"), std::string::npos) << isolated.result.stderr_text;
  EXPECT_EQ(ReadFile(target), "before");
  // The same command without isolation does write (the test can fail).
  ProcessRun open = RunProcess(Sh(script));
  EXPECT_EQ(open.isolation, "");
  EXPECT_EQ(ReadFile(target), "after");
}

TEST(FilesystemIsolation, TheChildCannotSignalProcessesOutsideItsSandbox) {
  if (!Supported()) GTEST_SKIP() << FilesystemIsolationSupport();
  if (FilesystemIsolationSupport() < "landlock (ABI 6)") GTEST_SKIP() << "signal scoping needs Landlock ABI 6";
  pid_t victim = fork();
  if (victim == 0) {
    ::pause();
    _exit(0);
  }
  ProcessRun r = RunProcess(Isolated("kill -TERM " + std::to_string(victim) + " && echo KILLED", "/nonexistent"));
  usleep(100'000);
  EXPECT_EQ(r.result.stdout_text.find("KILLED"), std::string::npos) << r.result.stderr_text;
  EXPECT_TRUE(exec_test::PidAlive(victim));
  kill(victim, SIGKILL);
  waitpid(victim, nullptr, 0);
}

// Abstract unix sockets have no file for a path rule; Landlock's scope (ABI 6) keeps the child from connecting to
// one that a process outside its sandbox listens on (D-Bus, X11, a service of the host).
TEST(FilesystemIsolation, TheChildCannotReachAnAbstractUnixSocketOutsideItsSandbox) {
  if (!Supported()) GTEST_SKIP() << FilesystemIsolationSupport();
  if (FilesystemIsolationSupport() < "landlock (ABI 6)") GTEST_SKIP() << "socket scoping needs Landlock ABI 6";
  const std::string name = "kf-isolation-test-" + std::to_string(::getpid());
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::memcpy(un.sun_path + 1, name.data(), name.size());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&un),
                   static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
            0);
  ASSERT_EQ(::listen(listener, 8), 0);
  const std::string script = "/usr/bin/python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); "
                             "s.connect('\\\\0" + name + "'); print('CONNECTED')\"";
  ProcessRun isolated = RunProcess(Isolated(script, "/nonexistent"));
  EXPECT_EQ(isolated.result.stdout_text.find("CONNECTED"), std::string::npos) << isolated.result.stderr_text;
  EXPECT_NE(isolated.result.stderr_text.find("PermissionError"), std::string::npos) << isolated.result.stderr_text;
  // The same command without isolation connects (the test can fail).
  ProcessRun open = RunProcess(Sh(script));
  EXPECT_NE(open.result.stdout_text.find("CONNECTED"), std::string::npos) << open.result.stderr_text;
  ::close(listener);
}

TEST(FilesystemIsolation, SupportIsReportedAndTooManyPathsAreRefused) {
  const std::string s = FilesystemIsolationSupport();
  EXPECT_TRUE(s.rfind("landlock (ABI ", 0) == 0 || s.rfind("unavailable: ", 0) == 0) << s;
  ProcessOptions o = Sh("true");
  o.filesystem_isolation = FilesystemIsolation{};
  for (int i = 0; i < 30; ++i) o.filesystem_isolation->writable_paths.push_back("/tmp/x" + std::to_string(i));
  if (!Supported()) GTEST_SKIP() << s;
  testing::ExpectError(ErrorKind::kInvalidArgument, [&] { RunProcess(o); });
}

}  // namespace
}  // namespace kf

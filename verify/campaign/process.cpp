#include "campaign/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace attn::verify {
namespace {

constexpr std::size_t kErrorTail = 2000;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

ProcessResult run_process(const std::string& command, std::string_view input, double timeout_seconds,
                          std::size_t output_limit) {
  // A program that exits without reading all its input must not kill us with SIGPIPE.
  static const bool sigpipe_ignored = (::signal(SIGPIPE, SIG_IGN), true);
  (void)sigpipe_ignored;
  ProcessResult result;
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return result;
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]), ::close(in_pipe[1]);
    return result;
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]), ::close(in_pipe[1]), ::close(out_pipe[0]), ::close(out_pipe[1]);
    return result;
  }
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Child: its own process group, so a timeout kills the shell and everything it started.
    ::setpgid(0, 0);
    ::signal(SIGPIPE, SIG_DFL);  // the parent ignores it; an ignored signal would survive exec
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  int to_child = in_pipe[1], from_child = out_pipe[0], errors = err_pipe[0];
  if (pid < 0) {
    close_fd(to_child), close_fd(from_child), close_fd(errors);
    return result;
  }
  ::setpgid(pid, pid);  // also from the parent, so killpg works even before the child ran
  for (int fd : {to_child, from_child, errors}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  std::size_t written = 0;
  if (input.empty()) close_fd(to_child);
  bool killed = false;
  char buffer[1 << 16];
  while (from_child >= 0 || errors >= 0) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed >= timeout_seconds) {
      result.end = ProcessEnd::timed_out;
      killed = true;
      break;
    }
    pollfd fds[3];
    int count = 0;
    for (int fd : {from_child, errors}) {
      if (fd >= 0) fds[count++] = {fd, POLLIN, 0};
    }
    if (to_child >= 0) fds[count++] = {to_child, POLLOUT, 0};
    const int wait_ms = static_cast<int>((timeout_seconds - elapsed) * 1000) + 1;
    if (::poll(fds, static_cast<nfds_t>(count), wait_ms) < 0 && errno != EINTR) break;
    for (int k = 0; k < count; ++k) {
      if (fds[k].revents == 0) continue;
      if (fds[k].fd == to_child) {
        const ssize_t n = ::write(to_child, input.data() + written, input.size() - written);
        if (n > 0) written += static_cast<std::size_t>(n);
        if (n < 0 && errno != EAGAIN) close_fd(to_child);  // the program closed its stdin early
        if (written == input.size()) close_fd(to_child);
        continue;
      }
      const ssize_t n = ::read(fds[k].fd, buffer, sizeof buffer);
      if (n <= 0) {
        if (n == 0 || errno != EAGAIN) close_fd(fds[k].fd == from_child ? from_child : errors);
        continue;
      }
      if (fds[k].fd == from_child) {
        result.output.append(buffer, static_cast<std::size_t>(n));
      } else {
        result.error_tail.append(buffer, static_cast<std::size_t>(n));
        if (result.error_tail.size() > 2 * kErrorTail)
          result.error_tail.erase(0, result.error_tail.size() - kErrorTail);
      }
    }
    if (result.output.size() > output_limit) {
      result.output.resize(output_limit);  // a read may overshoot the limit by one buffer
      result.end = ProcessEnd::output_limit;
      killed = true;
      break;
    }
  }
  if (killed) ::killpg(pid, SIGKILL);
  close_fd(to_child), close_fd(from_child), close_fd(errors);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (!killed) {
    // The shell may exit before a child it started; take the group down with it.
    ::killpg(pid, SIGKILL);
    if (WIFEXITED(status)) {
      result.end = ProcessEnd::exited;
      result.status = WEXITSTATUS(status);
    } else {
      result.end = ProcessEnd::signaled;
      result.status = WTERMSIG(status);
    }
  }
  if (result.error_tail.size() > kErrorTail) result.error_tail.erase(0, result.error_tail.size() - kErrorTail);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string describe(const ProcessResult& result, double timeout_seconds) {
  switch (result.end) {
    case ProcessEnd::exited:
      return "exit " + std::to_string(result.status);
    case ProcessEnd::signaled: {
      // sigabbrev_np (glibc 2.32) names the signal ("SEGV"); strsignal would describe it.
      const char* name = ::sigabbrev_np(result.status);
      return "killed by signal " + std::to_string(result.status) + " (" +
             (name ? "SIG" + std::string(name) : "unknown") + ")";
    }
    case ProcessEnd::timed_out: {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_seconds);
      return "timed out after " + std::string(seconds) + " s";
    }
    case ProcessEnd::output_limit:
      return "output limit exceeded";
    case ProcessEnd::spawn_failed:
      return "could not start /bin/sh";
  }
  return "?";
}

}  // namespace attn::verify

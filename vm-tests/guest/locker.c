/* vm-tests "locker" payload (the k3s incident's victim, in miniature): takes an exclusive,
 * non-blocking flock on a file in a hostPath mount, says `locked`, forks a child that
 * shares the lock (the same open file description), and both wait. A second incarnation
 * that finds the lock taken says `cannot acquire lock ...` and exits 1, as the incident's
 * databases did. Usage: /locker [FILE] (default /data/lock). Built static by mkimage.sh. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static void bye(int s) { (void)s; _exit(0); }

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "/data/lock";
  setvbuf(stdout, NULL, _IONBF, 0);
  signal(SIGINT, bye);
  signal(SIGTERM, bye);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    printf("cannot acquire lock %s: open: %s\n", path, strerror(errno));
    return 1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    printf("cannot acquire lock %s: %s\n", path, strerror(errno));
    return 1;
  }
  pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  printf("locked %s (pid %d; child %d shares the lock)\n", path, (int)getpid(), (int)child);
  for (;;) pause();
}

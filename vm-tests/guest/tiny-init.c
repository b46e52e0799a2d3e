/* vm-tests: the /init of the scenarios' initrd (every scenario but `dracut`, which boots
 * the initrd dracut builds with the guard's module). It does only what the root
 * filesystem needs before systemd can start from it: load the modules named in
 * /modules (virtio, virtio_blk, ext4 and their dependencies, in load order), wait for
 * /dev/vda (bounded), mount it read-write and hand over to /sbin/init. No udev and no
 * systemd in the initrd: under TCG dracut's initrd cost every boot 12 s, this about 1.
 * Any failure is printed to the console and powers the guest off (panic=-1 on the
 * kernel command line): the host then sees no report and fails the scenario. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
  fprintf(stderr, "tiny-init: %s: %s\n", what, strerror(errno));
  _exit(1); /* init exiting panics the kernel, which powers off (panic=-1) */
}

static void load_modules(void) {
  char line[512];
  FILE *list = fopen("/modules", "r");
  if (!list) die("/modules");
  while (fgets(line, sizeof line, list)) {
    line[strcspn(line, "\n")] = 0;
    if (!line[0]) continue;
    int fd = open(line, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(line);
    if (syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST) die(line);
    close(fd);
  }
  fclose(list);
}

static void wait_for(const char *dev, int tenths) {
  struct stat st;
  const struct timespec tick = {0, 100 * 1000 * 1000};
  for (int i = 0; i < tenths; i++) {
    if (stat(dev, &st) == 0 && S_ISBLK(st.st_mode)) return;
    nanosleep(&tick, NULL);
  }
  errno = ENODEV;
  die(dev);
}

/* /dev and /root, the mount points, are in the initrd (mkinitrd.sh) */
int main(void) {
  if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) != 0) die("mount /dev");
  load_modules();
  wait_for("/dev/vda", 300);
  if (mount("/dev/vda", "/root", "ext4", 0, NULL) != 0) die("mount /dev/vda");
  if (umount("/dev") != 0) die("umount /dev");
  /* switch_root: the new root is moved over / and becomes init's root; the initramfs's
   * 3 MiB stay allocated, which a test guest can spare */
  if (chdir("/root") != 0) die("chdir /root");
  if (mount(".", "/", NULL, MS_MOVE, NULL) != 0) die("move the root");
  if (chroot(".") != 0) die("chroot");
  if (chdir("/") != 0) die("chdir /");
  execl("/sbin/init", "/sbin/init", (char *)NULL);
  die("exec /sbin/init");
}

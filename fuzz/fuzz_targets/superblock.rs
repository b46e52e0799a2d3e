//! Superblocks (ext4, xfs, btrfs) and partition tables (GPT, MBR) read from a device.
//! The input is a small disk: byte 0 places the rest at that many 512-byte sectors (so a
//! btrfs superblock at 64 KiB needs no 64 KiB input), byte 1 is the partition number
//! asked for, bit 0 of byte 2 picks 4096-byte instead of 512-byte sectors.
#![no_main]
use containerd_guard::host::superblock::{identify, partition_of};
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let [at, number, sector, rest @ ..] = data else {
        return;
    };
    let at = usize::from(*at) * 512;
    let mut disk = vec![0u8; at + rest.len()];
    disk[at..].copy_from_slice(rest);
    let sector = if sector & 1 == 1 { 4096 } else { 512 };
    let _ = identify(&mut Cursor::new(&disk));
    let _ = partition_of(&mut Cursor::new(&disk), u32::from(*number), sector);
});

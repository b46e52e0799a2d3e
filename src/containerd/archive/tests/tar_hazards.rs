//! The tar itself as an attacker would shape it: garbage, long names, truncation, sizes
//! over the caps (refused from the header, before reading), links, names that climb out,
//! a name twice; and what goes into the archive the guard imports.

use super::*;

#[test]
fn garbage_is_not_a_tar() {
    let err = parse_tar(&[1u8; 1024]).unwrap_err();
    assert!(err.contains("bad entry header"), "{err}");
}

#[test]
fn long_names_and_dot_slash_prefixes_are_read() {
    let long = format!("blobs/sha256/{}", "a".repeat(200));
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(3);
    b.append_data(&mut h, format!("./{long}"), &b"abc"[..])
        .unwrap();
    let files = parse_tar(&b.into_inner().unwrap()).unwrap();
    assert_eq!(files.get(&long).map(Vec::as_slice), Some(&b"abc"[..]));
}

#[test]
fn a_truncated_archive_is_refused() {
    let whole = tar(&[("index.json", &[b'x'; 2000])]);
    // Cut inside the body, and inside the header.
    for cut in [512 + 1000, 300] {
        let err = parse_tar(&whole[..cut]).unwrap_err();
        assert!(
            err.contains("truncated") || err.contains("bad entry header"),
            "cut at {cut}: {err}"
        );
    }
    let err = parse_tar(&whole[..512 + 1000]).unwrap_err();
    assert!(
        err.contains("truncated: index.json has 1000 of its 2000 bytes"),
        "{err}"
    );
}

/// A reader that fails the test if more than `limit` bytes are read from it.
struct Tripwire<R> {
    inner: R,
    read: u64,
    limit: u64,
}

impl<R: Read> Read for Tripwire<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        assert!(self.read <= self.limit, "read {} bytes", self.read);
        Ok(n)
    }
}

#[test]
fn an_entry_claiming_10_gib_is_refused_from_its_header() {
    let claim = 10u64 << 30;
    let header = raw_header("blobs/sha256/big", tar::EntryType::Regular, claim, "");
    // Behind the header, an endless body: reading it would trip the wire or run out of
    // memory; the refusal must come from the header alone.
    let body = std::io::repeat(0);
    let reader = Tripwire {
        inner: Cursor::new(header.as_bytes().to_vec()).chain(body),
        read: 0,
        limit: 64 << 10,
    };
    let err = read_entries(reader).unwrap_err();
    assert!(
        err.contains("blobs/sha256/big claims 10737418240 bytes, more than the 512 MiB"),
        "{err}"
    );
}

#[test]
fn entries_together_over_the_cap_are_refused() {
    // Each fits the (here 3 MiB) cap, together they do not: the budget is the archive's.
    let two = tar(&[("a", &[1u8; 2 << 20]), ("b", &[2u8; 2 << 20])]);
    let err = read_capped(&two[..], 3 << 20).unwrap_err();
    assert!(
        err.contains("b claims 2097152 bytes, more than the 3 MiB"),
        "{err}"
    );
    assert_eq!(read_capped(&two[..], 4 << 20).unwrap().len(), 2);
}

#[test]
fn an_archive_file_over_the_cap_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.tar");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(MAX_ARCHIVE + 1).unwrap(); // sparse: no disk used
    let err = read_tar(&path).unwrap_err();
    assert!(
        err.contains("huge.tar") && err.contains("larger than the 512 MiB accepted"),
        "{err}"
    );
}

#[test]
fn hard_links_and_symlinks_are_refused_with_their_target() {
    for (kind, what) in [
        (tar::EntryType::Link, "hard link"),
        (tar::EntryType::Symlink, "symlink"),
    ] {
        let data = raw_tar("blobs/sha256/aa", kind, 0, "../../etc/shadow");
        let err = parse_tar(&data).unwrap_err();
        let want = format!("blobs/sha256/aa is a {what} to \"../../etc/shadow\": refused");
        assert!(err.contains(&want), "{err}");
    }
    let fifo = raw_tar("index.json", tar::EntryType::Fifo, 0, "");
    let err = parse_tar(&fifo).unwrap_err();
    assert!(err.contains("not a regular file"), "{err}");
}

#[test]
fn names_that_climb_out_or_are_absolute_are_refused() {
    for name in ["../index.json", "blobs/../../x", "/etc/passwd"] {
        let err = parse_tar(&raw_tar(name, tar::EntryType::Regular, 4, "")).unwrap_err();
        assert!(err.contains("absolute or climbs out"), "{name}: {err}");
    }
}

#[test]
fn a_name_twice_is_refused() {
    // Verification would read one copy and the import might read the other.
    let data = tar(&[("index.json", b"{}"), ("./index.json", b"[]")]);
    let err = parse_tar(&data).unwrap_err();
    assert!(err.contains("index.json is in the archive twice"), "{err}");
}

#[test]
fn directories_are_skipped() {
    // As `tar -C layout -cf x.tar .` writes it: `./` first, then `./`-prefixed names.
    let mut data = raw_header("./", tar::EntryType::Directory, 0, "")
        .as_bytes()
        .to_vec();
    data.extend_from_slice(
        raw_header("./blobs/sha256/", tar::EntryType::Directory, 0, "").as_bytes(),
    );
    data.extend_from_slice(&tar(&[("./index.json", b"{}")]));
    let files = parse_tar(&data).unwrap();
    assert_eq!(files.keys().collect::<Vec<_>>(), ["index.json"]);
}

#[test]
fn only_the_verified_image_goes_into_the_archive_imported_under_the_wanted_name_alone() {
    // The wanted image, plus a second image and the same manifest again under a name the
    // node already uses.
    let (manifest, blobs) = image(b"wanted-layer");
    let (other_manifest, other_blobs) = image(b"other-layer");
    let (md, od) = (sha256_digest(&manifest), sha256_digest(&other_manifest));
    let entry = |digest: &str, size: usize, name: &str| {
        json!({"mediaType": MT_OCI_MANIFEST, "digest": digest, "size": size,
               "annotations": {"io.containerd.image.name": name}})
    };
    let index = serde_json::to_vec(&json!({"schemaVersion": 2, "manifests": [
        entry(&md, manifest.len(), NAME),
        entry(&od, other_manifest.len(), "docker.io/library/other:1"),
        entry(&md, manifest.len(), "docker.io/library/busybox:latest"),
    ]}))
    .unwrap();
    let mut all = blobs.clone();
    all.extend(other_blobs.clone());
    all.push((blob_name(&md), manifest.clone()));
    all.push((blob_name(&od), other_manifest.clone()));
    let files = parse_tar(&layout(&index, &all)).unwrap();
    let v = verify(&files, NAME, "linux", "amd64").unwrap();
    let only = parse_tar(&only_verified(&files, &v, NAME).unwrap()).unwrap();

    let mut want: Vec<String> = blobs.iter().map(|(n, _)| n.clone()).collect();
    want.extend([blob_name(&md), "index.json".into(), "oci-layout".into()]);
    want.sort();
    assert_eq!(only.keys().cloned().collect::<Vec<_>>(), want);
    let index: Value = serde_json::from_slice(&only["index.json"]).unwrap();
    assert_eq!(
        index["manifests"],
        json!([entry(&md, manifest.len(), NAME)]),
        "one entry, named only as wanted"
    );
    let again = verify(&only, NAME, "linux", "amd64").unwrap();
    assert_eq!(again.names, vec![NAME.to_string()]);
}

#[test]
fn a_docker_archive_keeps_only_the_wanted_entry_and_tags_it_only_as_wanted() {
    let (layer, config, chex) = docker_layer_and_config();
    let list = serde_json::to_vec(&json!([
        {"Config": format!("{chex}.json"), "RepoTags": [NAME, "docker.io/library/busybox:latest"],
         "Layers": ["abc/layer.tar"]},
        {"Config": format!("{chex}.json"), "RepoTags": ["docker.io/library/other:1"],
         "Layers": ["abc/layer.tar"]}
    ]))
    .unwrap();
    let files = parse_tar(&tar(&[
        ("manifest.json", &list),
        (&format!("{chex}.json"), &config),
        ("abc/layer.tar", &layer),
        ("repositories", b"{}"),
    ]))
    .unwrap();
    let v = verify(&files, NAME, "linux", "amd64").unwrap();
    let only = parse_tar(&only_verified(&files, &v, NAME).unwrap()).unwrap();
    let config_name = format!("{chex}.json");
    let names: Vec<&str> = only.keys().map(String::as_str).collect();
    assert_eq!(names, ["abc/layer.tar", &config_name, "manifest.json"]);
    let list: Value = serde_json::from_slice(&only["manifest.json"]).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["RepoTags"], json!([NAME]));
}

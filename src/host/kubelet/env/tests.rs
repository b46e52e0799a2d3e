use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn quotes_escapes_comments_and_continuations_as_systemd_reads_them() {
    let text = "\
# a comment\n\
; another\n\
  # indented, and continued \\\n\
NOT_A_KEY=because the line above continues\n\
PLAIN=a b  \n\
DQ=\"--x=1 \\\"two\\\" \\$HOME \\n\"\n\
SQ='--y=\"2\" \\n'\n\
JOINED=--a=1 \\\n--b=2\n\
DQ_JOINED=\"--c=3 \\\n--d=4\"\n\
ESC=a\\ b\\#c\n\
  SPACED  =  v\n\
1BAD=x\n\
no equals sign\n\
LAST=one\n\
LAST=two";
    assert_eq!(
        parse_file(text),
        [
            ("PLAIN", "a b"),
            ("DQ", "--x=1 \"two\" $HOME \\n"),
            ("SQ", "--y=\"2\" \\n"),
            ("JOINED", "--a=1 --b=2"),
            ("DQ_JOINED", "--c=3 --d=4"),
            ("ESC", "a b#c"),
            ("SPACED", "v"),
            ("LAST", "one"),
            ("LAST", "two"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
}

#[test]
fn dollar_var_splits_and_braced_var_stays_one_word() {
    let e = env(&[("A", "--x=1 --y=2"), ("B", "v w")]);
    assert_eq!(
        command_line("/usr/bin/kubelet $A --z=${B} $UNSET ${UNSET}x $$y", &e),
        ["/usr/bin/kubelet", "--x=1", "--y=2", "--z=v w", "x", "$y"]
    );
    // `:` turns expansion off; the other prefixes do not
    assert_eq!(command_line(":/bin/k $A", &e), ["/bin/k", "$A"]);
    assert_eq!(command_line("-/bin/k $A", &e), ["/bin/k", "--x=1", "--y=2"]);
    assert_eq!(
        assignments("\"A=--config /x\" B=c 'C=d e' not-a-name=1"),
        [("A", "--config /x"), ("B", "c"), ("C", "d e")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
    );
}

#[test]
fn hostile_text_never_panics() {
    for text in [
        "\"",
        "'",
        "\\",
        "A=\"",
        "A='",
        "A=\\",
        "=",
        "#\\",
        "A=\"\\",
        "\u{0}=\u{0}",
    ] {
        let _ = parse_file(text);
        let _ = words(text);
        let _ = command_line(text, &BTreeMap::new());
        let _ = braced(text, &BTreeMap::new());
    }
}

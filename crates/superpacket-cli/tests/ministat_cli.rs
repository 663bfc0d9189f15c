//! `superpacket ministat` end to end: FreeBSD ministat's output for the
//! files in `tests/data/ministat` (the `.expected` files were printed by
//! ministat itself), standard input, options, and the exit codes of the CLI
//! contract (0 ok, 2 usage or I/O error).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ministat")
}

fn ministat(args: &[&str], dir: &Path) -> Output {
    Command::new(BIN).arg("ministat").args(args).current_dir(dir).output().expect("run superpacket")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn iflib_files_give_ministats_report() {
    let o = ministat(&["iflib-before.txt", "iflib-after.txt"], &data());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), std::fs::read_to_string(data().join("iflib.expected")).unwrap());
    assert!(stdout(&o).contains("Difference at 95.0% confidence\n\t-283615 +/- 57845.4\n\t-6.31587% +/- 1.22557%\n"));
}

#[test]
fn options_match_ministats_flags() {
    // ministat -c 80 -w 50 same1.txt same2.txt
    let o = ministat(&["-c", "80", "-w", "50", "same1.txt", "same2.txt"], &data());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), std::fs::read_to_string(data().join("same-c80-w50.expected")).unwrap());
    // ministat -c 99 -s -w 40 ties1.txt ties2.txt ties3.txt
    let o = ministat(&["--confidence", "99", "-s", "--width", "40", "ties1.txt", "ties2.txt", "ties3.txt"], &data());
    assert_eq!(stdout(&o), std::fs::read_to_string(data().join("ties3-c99-s-w40.expected")).unwrap());
    // Statistics only; Welch.
    let o = ministat(&["--no-plot", "--welch", "sizes1.txt", "sizes2.txt"], &data());
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(!out.contains("+---"), "{out}");
    assert!(out.contains("\t9 +/- 2.309\n") && out.contains("(Welch's t, df = 7.94118, se = 1)"), "{out}");
    // A second column.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("two.txt"), "1 10\n2 20\n3 30\n").unwrap();
    let o = ministat(&["-C", "2", "two.txt"], dir.path());
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stdout(&o).contains("x   3            10            30            20            20            10"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn reads_standard_input() {
    let mut child = Command::new(BIN)
        .args(["ministat", "-", "iflib-after.txt"])
        .current_dir(data())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&std::fs::read(data().join("iflib-before.txt")).unwrap()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let expected =
        std::fs::read_to_string(data().join("iflib.expected")).unwrap().replace("iflib-before.txt", "<stdin>");
    assert_eq!(stdout(&o), expected);
    let o = ministat(&["-", "-"], &data());
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn bad_input_is_an_error_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.txt"), "1\n2\n3\n").unwrap();
    std::fs::write(dir.path().join("bad.txt"), "# runs\n1\n12x\n").unwrap();
    std::fs::write(dir.path().join("empty.txt"), "# nothing\n\n").unwrap();
    std::fs::write(dir.path().join("one.txt"), "5\n").unwrap();

    let o = ministat(&["good.txt", "bad.txt"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.txt:3: '12x' is not a number"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());

    let o = ministat(&["good.txt", "missing.txt"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.txt"), "{}", stderr(&o));

    let o = ministat(&["empty.txt"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("empty.txt: no numbers"), "{}", stderr(&o));

    // Usage errors: unsupported confidence, no file, too many files.
    assert_eq!(ministat(&["-c", "97", "good.txt"], dir.path()).status.code(), Some(2));
    assert_eq!(ministat(&[], dir.path()).status.code(), Some(2));
    let eight = ["good.txt"; 8];
    assert_eq!(ministat(&eight, dir.path()).status.code(), Some(2));

    // A single value is not an error, but there is no test.
    let o = ministat(&["good.txt", "one.txt"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("No test at 95.0% confidence: the candidate sample has 1 value"), "{}", stdout(&o));
}

//! Expected outputs in `tests/data/ministat/*.expected` were printed by
//! FreeBSD's ministat for the data files next to them.

use super::super::stats::{Confidence, CriticalValues, TestOptions};
use super::*;

macro_rules! data {
    ($name:literal) => {
        ($name, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ministat/", $name)))
    };
}

fn sets(files: &[(&str, &str)]) -> Vec<Dataset> {
    files
        .iter()
        .map(|(name, text)| Dataset { name: name.to_string(), values: parse_values(text, 1).unwrap() })
        .collect()
}

fn opts(confidence: Confidence, width: usize, separate_bars: bool) -> RenderOptions {
    RenderOptions { width, separate_bars, plot: true, test: TestOptions { confidence, ..TestOptions::default() } }
}

#[test]
fn iflib_report_is_ministats() {
    let d = sets(&[data!("iflib-before.txt"), data!("iflib-after.txt")]);
    let out = render(&d, &RenderOptions::default());
    assert_eq!(out, include_str!("../../tests/data/ministat/iflib.expected"));
    assert!(out.contains("Difference at 95.0% confidence\n\t-283615 +/- 57845.4\n\t-6.31587% +/- 1.22557%\n"));
}

#[test]
fn plots_and_tables_are_ministats() {
    let cases: [(Vec<Dataset>, RenderOptions, &str); 4] = [
        (
            sets(&[data!("ties1.txt"), data!("ties2.txt")]),
            RenderOptions::default(),
            include_str!("../../tests/data/ministat/ties.expected"),
        ),
        (
            sets(&[data!("same1.txt"), data!("same2.txt")]),
            opts(Confidence::P80, 50, false),
            include_str!("../../tests/data/ministat/same-c80-w50.expected"),
        ),
        (
            sets(&[data!("ties1.txt"), data!("ties2.txt"), data!("ties3.txt")]),
            opts(Confidence::P99, 40, true),
            include_str!("../../tests/data/ministat/ties3-c99-s-w40.expected"),
        ),
        (
            sets(&[data!("sizes1.txt"), data!("sizes2.txt"), data!("sizes3-comments.txt")]),
            opts(Confidence::P80, 74, false),
            include_str!("../../tests/data/ministat/sizes-c80.expected"),
        ),
    ];
    for (d, o, expected) in cases {
        assert_eq!(render(&d, &o), expected, "{:?}", d.iter().map(|d| &d.name).collect::<Vec<_>>());
    }
}

#[test]
fn large_samples_match_ministats_table_mode() {
    // 128 degrees of freedom: ministat uses the normal quantile there.
    let d = sets(&[data!("large1.txt"), data!("large2.txt")]);
    for (confidence, expected) in [
        (Confidence::P95, include_str!("../../tests/data/ministat/large.expected")),
        (Confidence::P90, include_str!("../../tests/data/ministat/large-c90.expected")),
    ] {
        let mut o = opts(confidence, 74, false);
        o.test.critical = CriticalValues::MinistatTable;
        // ministat sizes the plot for the last data set (4 rows here) and
        // cuts off the taller stacks of x (7 values share a column); this
        // plot keeps them: the same output with three more rows of x on top.
        let ours = render(&d, &o);
        let mut lines: Vec<&str> = ours.lines().collect();
        let extra: Vec<&str> = lines.drain(3..6).collect();
        assert!(extra.iter().all(|l| l.trim_matches('|').chars().all(|c| c == 'x' || c == ' ')), "{ours}");
        assert_eq!(lines.join("\n") + "\n", expected);
        // The exact t quantile is a little larger: a wider interval, same difference.
        o.test.critical = CriticalValues::Exact;
        let exact = render(&d, &o);
        assert_ne!(exact, expected);
        assert!(exact.contains("\t2.41607 +/- "), "{exact}");
    }
}

#[test]
fn parsing_skips_comments_and_names_bad_lines() {
    assert_eq!(parse_values("# c\n\n 1 \n2\t# x\n#3\n4 5\n", 1).unwrap(), vec![1.0, 2.0, 4.0]);
    assert_eq!(parse_values("1 10\n2 20\n3\n# 4 40\n", 2).unwrap(), vec![10.0, 20.0]);
    assert_eq!(parse_values("1e3\n-2.5\r\n+7\n", 1).unwrap(), vec![1000.0, -2.5, 7.0]);
    let e = parse_values("1\n2\nabc\n", 1).unwrap_err();
    assert_eq!((e.line, e.to_string()), (3, "line 3: 'abc' is not a number".to_string()));
    assert_eq!(parse_values("1\nnan\n", 1).unwrap_err().line, 2);
    assert_eq!(parse_values("inf\n", 1).unwrap_err().message, "'inf' is not a finite number");
    assert!(parse_values("", 1).unwrap().is_empty());
}

#[test]
fn degenerate_data_sets_render_without_panics() {
    let d = |name: &str, values: &[f64]| Dataset { name: name.into(), values: values.to_vec() };
    // Zero span: ministat's message instead of a plot.
    let out = render(&[d("a", &[5.0, 5.0, 5.0]), d("b", &[5.0, 5.0])], &RenderOptions::default());
    assert!(out.contains("[no plot, span is zero width]\n"), "{out}");
    assert!(out.contains("No difference proven at 95.0% confidence\n\t(both samples are constant and equal)"));
    // One value: no stddev, no test, a clear message.
    let out = render(&[d("a", &[1.0, 2.0, 3.0]), d("b", &[7.0])], &RenderOptions::default());
    assert!(out.contains("No test at 95.0% confidence: the candidate sample has 1 value"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("+   1") && l.ends_with("nan")), "{out}");
    // Constant but different: a difference with a zero-width interval.
    let out = render(&[d("a", &[1.0, 1.0, 1.0]), d("b", &[2.0, 2.0, 2.0])], &RenderOptions::default());
    assert!(out.contains("Difference at 95.0% confidence\n\t1 +/- 0\n\t100% +/- 0%\n"), "{out}");
    // An empty data set and a single one.
    let out = render(&[d("a", &[]), d("b", &[1.0, 2.0])], &RenderOptions::default());
    assert!(out.contains("(no values in a)") && out.contains("No test: the reference data set has no values"));
    let out = render(&[d("only", &[1.0, 2.0, 4.0])], &RenderOptions { plot: false, ..RenderOptions::default() });
    assert!(!out.contains("+---") && out.contains("x   3"), "{out}");
    // A tiny width still draws.
    let out = render(&[d("a", &[1.0, 2.0])], &RenderOptions { width: 1, ..RenderOptions::default() });
    assert!(out.contains("+--+\n|"), "{out}");
}

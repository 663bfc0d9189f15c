use super::*;

fn iflib() -> (Moments, Moments) {
    // FreeBSD iflib D51772: two runs of 5, as published with ministat.
    (Moments::from_stddev(5, 4490520.1, 49385.446), Moments::from_stddev(5, 4206904.7, 26595.109))
}

#[test]
fn reproduces_the_iflib_verdict() {
    let (x, y) = iflib();
    let c = compare(&x, &y, &TestOptions::default()).unwrap();
    assert_eq!(c.verdict, Verdict::Difference);
    assert_eq!(c.verdict_text(), "Difference at 95.0% confidence");
    assert_eq!(fmt_g(c.difference, 6), "-283615");
    assert_eq!(fmt_g(c.difference_ci, 6), "57845.4");
    assert_eq!(fmt_g(c.relative_pct.unwrap(), 6), "-6.31587");
    assert_eq!(fmt_g(c.relative_ci_pct.unwrap(), 6), "1.22557");
    assert_eq!(c.dof, 8.0);
    assert_eq!(c.t, 2.306);
    assert_eq!(
        c.ministat_text(),
        "Difference at 95.0% confidence\n\t-283615 +/- 57845.4\n\t-6.31587% +/- 1.22557%\n\t(Student's t, pooled s = 39662.5)\n"
    );
    // The same from FreeBSD's table.
    let t = TestOptions { critical: CriticalValues::MinistatTable, ..TestOptions::default() };
    assert_eq!(compare(&x, &y, &t).unwrap().ministat_text(), c.ministat_text());
}

#[test]
fn iflib_at_other_levels() {
    let (x, y) = iflib();
    let at = |confidence, critical| {
        let c = compare(&x, &y, &TestOptions { confidence, critical, ..TestOptions::default() }).unwrap();
        (fmt_g(c.difference_ci, 6), fmt_g(c.relative_ci_pct.unwrap(), 6))
    };
    // Values printed by ministat for the same data.
    assert_eq!(at(Confidence::P98, CriticalValues::Exact), ("72645.4".into(), "1.53914".into()));
    assert_eq!(at(Confidence::P99_5, CriticalValues::MinistatTable), ("112856".into(), "2.39108".into()));
    // The real 99.5% quantile for 8 degrees of freedom is 3.833, not ministat's 4.499.
    let c = compare(&x, &y, &TestOptions { confidence: Confidence::P99_5, ..TestOptions::default() }).unwrap();
    assert_eq!(c.t, 3.833);
}

#[test]
fn exact_critical_values_are_ministats_table() {
    // Every entry for 80..99% and 1..=100 degrees of freedom.
    for (dof, row) in MINISTAT_T_TABLE.iter().enumerate().skip(1) {
        for conf in &Confidence::ALL[..5] {
            let t = critical_value(*conf, dof as f64, CriticalValues::Exact);
            assert_eq!(t, row[conf.index()], "{conf} with {dof} degrees of freedom");
        }
        // ministat's "99.5%" column is the 0.999 quantile (99.8% two-sided).
        let t998 = (t_quantile(0.998, dof as f64) * 1000.0).round() / 1000.0;
        // (The table's first entries are a little off: 318.313 for 318.309.)
        assert!((t998 - row[5]).abs() <= 0.0041, "dof {dof}: {t998} vs {}", row[5]);
    }
    // The infinity row is the normal quantile: t with a huge dof.
    for conf in &Confidence::ALL[..5] {
        let t = critical_value(*conf, 1e9, CriticalValues::Exact);
        assert_eq!(t, MINISTAT_T_TABLE[0][conf.index()], "{conf}");
    }
    // Above 100 degrees of freedom ministat falls back to that row; exact does not.
    assert_eq!(critical_value(Confidence::P95, 128.0, CriticalValues::MinistatTable), 1.960);
    assert_eq!(critical_value(Confidence::P95, 128.0, CriticalValues::Exact), 1.979);
}

#[test]
fn t_quantile_against_closed_forms() {
    // One degree of freedom: Cauchy, t = tan(pi c / 2). Two: t = sqrt(2 c^2 / (1 - c^2)).
    for c in [0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999] {
        let cauchy = (std::f64::consts::PI * c / 2.0).tan();
        let two = (2.0 * c * c / (1.0 - c * c)).sqrt();
        assert!((t_quantile(c, 1.0) / cauchy - 1.0).abs() < 1e-9, "{c}: {} vs {cauchy}", t_quantile(c, 1.0));
        assert!((t_quantile(c, 2.0) / two - 1.0).abs() < 1e-9, "{c}: {} vs {two}", t_quantile(c, 2.0));
    }
    // Non-integer degrees of freedom (Welch), checked by numeric integration of the density.
    assert!((t_quantile(0.95, 7.941176470588235) - 2.308980787887763).abs() < 1e-6);
    assert!(t_quantile(1.0, 5.0).is_nan() && t_quantile(0.95, 0.0).is_nan());
    assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-13);
    assert!((ln_gamma(10.0) - 362880f64.ln()).abs() < 1e-12);
}

#[test]
fn summary_matches_ministat() {
    let s = Summary::of(&[1.0, 2.0, 2.0, 2.0, 5.0, 6.0]).unwrap();
    assert_eq!((s.n, s.min, s.max, s.median, s.avg, s.stddev), (6, 1.0, 6.0, 2.0, 3.0, 2.0));
    let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 1.0]).unwrap();
    assert_eq!((s.median, s.avg), (2.0, 2.4));
    assert_eq!(fmt_g(s.stddev, 8), "1.6733201");
    // Large means: two-pass variance keeps the digits.
    let s = Summary::of(&[1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0]).unwrap();
    assert_eq!(s.stddev, 1.0);
    assert!(Summary::of(&[]).is_none());
}

#[test]
fn welch_with_unequal_sizes() {
    let r = Summary::of(&[100.0, 102.0, 104.0, 101.0, 103.0, 99.0]).unwrap();
    let c = Summary::of(&[110.0, 111.0, 109.0, 112.0]).unwrap();
    let w = TestOptions { method: Method::Welch, ..TestOptions::default() };
    let x = compare(&r.moments(), &c.moments(), &w).unwrap();
    assert_eq!(fmt_g(x.dof, 6), "7.94118");
    assert_eq!(x.t, 2.309);
    assert!((x.s - 1.0).abs() < 1e-12, "standard error {}", x.s);
    assert_eq!(
        x.ministat_text(),
        "Difference at 95.0% confidence\n\t9 +/- 2.309\n\t8.867% +/- 2.39461%\n\t(Welch's t, df = 7.94118, se = 1)\n"
    );
    // Student on the same data, as ministat prints it at 80%.
    let s = TestOptions { confidence: Confidence::P80, ..TestOptions::default() };
    let y = compare(&r.moments(), &c.moments(), &s).unwrap();
    assert_eq!(
        y.ministat_text(),
        "Difference at 80.0% confidence\n\t9 +/- 1.5123\n\t8.867% +/- 1.59365%\n\t(Student's t, pooled s = 1.67705)\n"
    );
}

#[test]
fn degenerate_inputs() {
    let one = Summary::of(&[3.0]).unwrap();
    assert_eq!(one.n, 1);
    assert!(one.stddev.is_nan());
    let three = Summary::of(&[1.0, 2.0, 3.0]).unwrap();
    let e = compare(&one.moments(), &three.moments(), &TestOptions::default()).unwrap_err();
    assert_eq!(e, StatsError::TooFewValues { which: "reference", n: 1 });
    assert_eq!(e.to_string(), "the reference sample has 1 value; a t test needs at least 2 per sample");
    let e = compare(&three.moments(), &one.moments(), &TestOptions::default()).unwrap_err();
    assert!(matches!(e, StatsError::TooFewValues { which: "candidate", n: 1 }));

    for method in [Method::Student, Method::Welch] {
        let opts = TestOptions { method, ..TestOptions::default() };
        // Zero variance, equal constants.
        let k = Summary::of(&[7.0; 5]).unwrap();
        let c = compare(&k.moments(), &k.moments(), &opts).unwrap();
        assert_eq!(c.verdict, Verdict::NoDifference);
        assert_eq!(c.difference_ci, 0.0);
        assert!(c.note.as_deref().unwrap().contains("constant"), "{c:?}");
        // Zero variance, different constants: the difference is exact.
        let k2 = Summary::of(&[8.0; 5]).unwrap();
        let c = compare(&k.moments(), &k2.moments(), &opts).unwrap();
        assert_eq!(c.verdict, Verdict::Difference);
        assert_eq!((c.difference, c.difference_ci), (1.0, 0.0));
        assert!(c.ministat_text().contains("zero variance"), "{}", c.ministat_text());
        // One sample constant, the other not.
        let c = compare(&k.moments(), &three.moments(), &opts).unwrap();
        assert!(c.difference_ci.is_finite() && c.difference_ci > 0.0);
        // A zero reference mean: no relative difference, no panic.
        let z = Summary::of(&[-1.0, 0.0, 1.0]).unwrap();
        let c = compare(&z.moments(), &Summary::of(&[5.0, 6.0, 7.0]).unwrap().moments(), &opts).unwrap();
        assert_eq!((c.relative_pct, c.relative_ci_pct), (None, None));
        assert!(c.ministat_text().contains("reference mean is 0"));
    }
    let nan = Moments { n: 3, mean: f64::NAN, variance: 1.0 };
    assert!(matches!(
        compare(&nan, &three.moments(), &TestOptions::default()),
        Err(StatsError::NonFinite { which: "reference" })
    ));
}

#[test]
fn confidence_levels_parse() {
    assert_eq!("95".parse::<Confidence>(), Ok(Confidence::P95));
    assert_eq!("99.5".parse::<Confidence>(), Ok(Confidence::P99_5));
    assert_eq!("80%".parse::<Confidence>(), Ok(Confidence::P80));
    assert!("97".parse::<Confidence>().unwrap_err().contains("99.5"));
    assert!("x".parse::<Confidence>().is_err());
    assert_eq!(Confidence::P99_5.to_string(), "99.5%");
    assert_eq!(Confidence::default().to_string(), "95.0%");
}

#[test]
fn printf_g_formatting() {
    // Expected strings are C's printf("%g") / ("%.8g").
    for (v, p, s) in [
        (-283615.4, 6, "-283615"),
        (57845.43, 6, "57845.4"),
        (4490520.1, 8, "4490520.1"),
        (0.0001234, 6, "0.0001234"),
        (0.00001234, 6, "1.234e-05"),
        (123456789.0, 6, "1.23457e+08"),
        (100000.0, 6, "100000"),
        (999999.5, 6, "1e+06"),
        (1e6, 6, "1e+06"),
        (0.1, 6, "0.1"),
        (2.0, 8, "2"),
        (1.6733200530681511, 8, "1.6733201"),
        (0.0, 6, "0"),
        (-1.5e-300, 6, "-1.5e-300"),
    ] {
        assert_eq!(fmt_g(v, p), s, "{v} %.{p}g");
    }
    assert_eq!(fmt_g(f64::NAN, 6), "nan");
    assert_eq!(fmt_g(f64::NEG_INFINITY, 6), "-inf");
}

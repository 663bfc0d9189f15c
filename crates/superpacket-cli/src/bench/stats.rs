//! ministat-style statistics: summaries and Student's t test.
//!
//! What FreeBSD's `ministat(1)` computes, the way it computes it, so the
//! figures agree digit for digit with `ministat` (and with the way FreeBSD
//! judged the iflib change: "Difference at 95.0% confidence: -283615 +/-
//! 57845.4, -6.31587% +/- 1.22557%"):
//!
//! - [`Summary`]: N, min, max, median (mean of the middle two for an even N),
//!   average, and the sample standard deviation (two-pass, N - 1 divisor).
//! - [`compare`]: the candidate's mean minus the reference's, with the
//!   half-width of its confidence interval, `t * s_pooled * sqrt(1/n1 + 1/n2)`
//!   with `n1 + n2 - 2` degrees of freedom ([`Method::Student`], ministat's
//!   test), or `t * sqrt(v1/n1 + v2/n2)` with the Welch–Satterthwaite degrees
//!   of freedom ([`Method::Welch`], for unequal variances). The verdict is
//!   "Difference" when `|difference| > half-width`. The relative difference
//!   is `difference / reference mean` and its interval is ministat's (the
//!   delta method for a ratio of means:
//!   `t * sqrt(v_c/n_c + v_r * (m_c/m_r)^2 / n_r) / m_r` for equal sizes, with
//!   ministat's pooled weights for unequal sizes).
//!
//! # Critical values
//! [`CriticalValues::Exact`] (the default) computes the two-sided Student's t
//! quantile from the regularized incomplete beta function
//! ([`t_quantile`]) and rounds it to three decimals, the precision of
//! ministat's table: for 80–99% confidence and up to 100 degrees of freedom
//! the values are exactly ministat's (a test checks every one of them). Two
//! deliberate differences from FreeBSD's table:
//! - above 100 degrees of freedom ministat uses the normal quantile (its
//!   "infinity" row), which is slightly too small; here the t quantile
//!   continues to shrink towards it;
//! - ministat's "99.5%" column holds the 99.8% two-sided values (the 0.999
//!   quantile: 318.313 for one degree of freedom instead of 127.321); here
//!   99.5% means 99.5%.
//!
//! [`CriticalValues::MinistatTable`] uses FreeBSD's table verbatim
//! ([`MINISTAT_T_TABLE`]), for output identical to `ministat` in every case.
//!
//! # Degenerate inputs
//! A sample with one value has no standard deviation (NaN in its
//! [`Summary`]) and cannot be tested ([`StatsError::TooFewValues`]). Two
//! samples with zero variance give a zero-width interval: any difference of
//! the means is then a "Difference" (a constant is known exactly), and
//! [`Comparison::note`] says so. A zero reference mean leaves the relative
//! difference undefined (`None`). Nothing here panics on finite input.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// The confidence levels ministat offers, in percent.
pub const CONFIDENCE_LEVELS: [f64; 6] = [80.0, 90.0, 95.0, 98.0, 99.0, 99.5];

/// A confidence level of the t test (ministat's six).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Confidence {
    /// 80%.
    P80,
    /// 90%.
    P90,
    /// 95% (the default, as in ministat).
    #[default]
    P95,
    /// 98%.
    P98,
    /// 99%.
    P99,
    /// 99.5%.
    P99_5,
}

impl Confidence {
    /// Every level, lowest first.
    pub const ALL: [Confidence; 6] =
        [Confidence::P80, Confidence::P90, Confidence::P95, Confidence::P98, Confidence::P99, Confidence::P99_5];

    /// Column of the level in [`MINISTAT_T_TABLE`].
    pub fn index(self) -> usize {
        Confidence::ALL.iter().position(|&c| c == self).expect("every level is in ALL")
    }

    /// The level in percent, e.g. `95.0`.
    pub fn percent(self) -> f64 {
        CONFIDENCE_LEVELS[self.index()]
    }

    /// The level for a percentage (exactly one of [`CONFIDENCE_LEVELS`]).
    pub fn from_percent(p: f64) -> Option<Confidence> {
        Confidence::ALL.into_iter().find(|c| c.percent() == p)
    }
}

impl fmt::Display for Confidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1}%", self.percent())
    }
}

impl FromStr for Confidence {
    type Err = String;

    /// Accepts `80`, `90`, `95`, `98`, `99`, `99.5` (optionally with a `%`).
    fn from_str(s: &str) -> Result<Confidence, String> {
        let t = s.trim().trim_end_matches('%');
        t.parse::<f64>()
            .ok()
            .and_then(Confidence::from_percent)
            .ok_or_else(|| format!("unsupported confidence level '{s}' (one of 80, 90, 95, 98, 99, 99.5)"))
    }
}

impl Serialize for Confidence {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.percent())
    }
}

/// Which t test [`compare`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Student's t with the pooled standard deviation (ministat's test;
    /// assumes equal variances).
    #[default]
    Student,
    /// Welch's t (unequal variances; Welch–Satterthwaite degrees of freedom).
    Welch,
}

/// Where [`compare`] takes its critical t values from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CriticalValues {
    /// The t quantile computed exactly, rounded to three decimals (see the
    /// module documentation).
    #[default]
    Exact,
    /// FreeBSD ministat's table verbatim (normal quantiles above 100 degrees
    /// of freedom; its 99.5% column holds 99.8% values).
    MinistatTable,
}

/// The options of [`compare`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TestOptions {
    /// Confidence level.
    pub confidence: Confidence,
    /// Student (pooled) or Welch.
    pub method: Method,
    /// Source of the critical values.
    pub critical: CriticalValues,
}

/// N, mean and variance of a sample: all [`compare`] needs (published
/// results often give only these).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moments {
    /// Number of values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample variance (N - 1 divisor); NaN for N < 2.
    pub variance: f64,
}

impl Moments {
    /// From a mean and a sample standard deviation.
    pub fn from_stddev(n: usize, mean: f64, stddev: f64) -> Moments {
        Moments { n, mean, variance: stddev * stddev }
    }
}

/// ministat's per-sample figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Median (mean of the two middle values for an even N).
    pub median: f64,
    /// Arithmetic mean.
    pub avg: f64,
    /// Sample standard deviation (N - 1 divisor); NaN for N = 1.
    pub stddev: f64,
}

impl Summary {
    /// The summary of `values`; `None` if there are none. Values must be
    /// finite (callers filter or reject the others).
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let avg = v.iter().sum::<f64>() / n as f64;
        // Two passes, as current ministat: no cancellation for large means.
        let ss: f64 = v.iter().map(|x| (x - avg) * (x - avg)).sum();
        let stddev = if n < 2 { f64::NAN } else { (ss / (n as f64 - 1.0)).sqrt() };
        let median = if n.is_multiple_of(2) { (v[n / 2 - 1] + v[n / 2]) / 2.0 } else { v[n / 2] };
        Some(Summary { n, min: v[0], max: v[n - 1], median, avg, stddev })
    }

    /// N, mean and variance.
    pub fn moments(&self) -> Moments {
        Moments { n: self.n, mean: self.avg, variance: self.stddev * self.stddev }
    }
}

/// The outcome of the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// `|difference| > half-width`: "Difference at C% confidence".
    Difference,
    /// "No difference proven at C% confidence".
    NoDifference,
}

/// The result of [`compare`]: candidate minus reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Confidence level.
    pub confidence: Confidence,
    /// Test used.
    pub method: Method,
    /// Critical values used.
    pub critical_values: CriticalValues,
    /// The verdict.
    pub verdict: Verdict,
    /// Degrees of freedom (`n1 + n2 - 2`, or Welch's, not an integer).
    pub dof: f64,
    /// The critical t value used.
    pub t: f64,
    /// Candidate mean minus reference mean.
    pub difference: f64,
    /// Half-width of the difference's confidence interval.
    pub difference_ci: f64,
    /// Difference in percent of the reference mean; `None` if that mean is 0.
    pub relative_pct: Option<f64>,
    /// Half-width of the relative difference's interval, in percent.
    pub relative_ci_pct: Option<f64>,
    /// Student: the pooled standard deviation; Welch: the standard error of
    /// the difference.
    pub s: f64,
    /// Why the result is degenerate, if it is (zero variances, zero reference mean).
    pub note: Option<String>,
}

impl Comparison {
    /// "Difference at 95.0% confidence" or "No difference proven at 95.0% confidence".
    pub fn verdict_text(&self) -> String {
        match self.verdict {
            Verdict::Difference => format!("Difference at {} confidence", self.confidence),
            Verdict::NoDifference => format!("No difference proven at {} confidence", self.confidence),
        }
    }

    /// ministat's block: the verdict line, then (for a difference) the
    /// difference, the relative difference and the test, each on a line
    /// starting with a tab.
    pub fn ministat_text(&self) -> String {
        let mut out = self.verdict_text() + "\n";
        if self.verdict == Verdict::Difference {
            out += &format!("\t{} +/- {}\n", fmt_g(self.difference, 6), fmt_g(self.difference_ci, 6));
            match (self.relative_pct, self.relative_ci_pct) {
                (Some(r), Some(e)) => out += &format!("\t{}% +/- {}%\n", fmt_g(r, 6), fmt_g(e, 6)),
                _ => out += "\t(no relative difference: the reference mean is 0)\n",
            }
            out += &match self.method {
                Method::Student => format!("\t(Student's t, pooled s = {})\n", fmt_g(self.s, 6)),
                Method::Welch => {
                    format!("\t(Welch's t, df = {}, se = {})\n", fmt_g(self.dof, 6), fmt_g(self.s, 6))
                }
            };
        }
        if let Some(note) = &self.note {
            out += &format!("\t({note})\n");
        }
        out
    }
}

/// Why two samples cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatsError {
    /// A sample has fewer than two values.
    #[error("the {which} sample has {n} value{}; a t test needs at least 2 per sample", if *n == 1 { "" } else { "s" })]
    TooFewValues {
        /// `"reference"` or `"candidate"`.
        which: &'static str,
        /// Its size.
        n: usize,
    },
    /// A mean or variance is not finite.
    #[error("the {which} sample has a non-finite mean or variance")]
    NonFinite {
        /// `"reference"` or `"candidate"`.
        which: &'static str,
    },
}

/// Compares `candidate` with `reference` (ministat's `Relative(ds, rs)`:
/// the reference is the first data set, `x`).
///
/// # Errors
/// A sample with fewer than 2 values, or non-finite moments.
pub fn compare(reference: &Moments, candidate: &Moments, opts: &TestOptions) -> Result<Comparison, StatsError> {
    for (which, m) in [("reference", reference), ("candidate", candidate)] {
        if m.n < 2 {
            return Err(StatsError::TooFewValues { which, n: m.n });
        }
        if !m.mean.is_finite() || !m.variance.is_finite() {
            return Err(StatsError::NonFinite { which });
        }
    }
    let (nr, nc) = (reference.n as f64, candidate.n as f64);
    let (vr, vc) = (reference.variance.max(0.0), candidate.variance.max(0.0));
    let (mr, mc) = (reference.mean, candidate.mean);
    let d = mc - mr;
    let (dof, s, se, rel_var) = match opts.method {
        Method::Student => {
            let dof = nr + nc - 2.0;
            let spool = (((nc - 1.0) * vc + (nr - 1.0) * vr) / dof).sqrt();
            let se = spool * (1.0 / nc + 1.0 / nr).sqrt();
            // ministat: re = ((nd-1)Vd + (nr-1)Vr md^2/mr^2) * (nd+nr) / (nd nr (nd+nr-2)).
            let rel = ((nc - 1.0) * vc + (nr - 1.0) * vr * (mc * mc) / (mr * mr)) * (nc + nr) / (nc * nr * dof);
            (dof, spool, se, rel)
        }
        Method::Welch => {
            let (a, b) = (vc / nc, vr / nr);
            let se2 = a + b;
            let dof = if se2 > 0.0 { se2 * se2 / (a * a / (nc - 1.0) + b * b / (nr - 1.0)) } else { nr + nc - 2.0 };
            let rel = a + b * (mc * mc) / (mr * mr);
            (dof, se2.sqrt(), se2.sqrt(), rel)
        }
    };
    let t = critical_value(opts.confidence, dof, opts.critical);
    let e = t * se;
    let verdict = if d.abs() > e { Verdict::Difference } else { Verdict::NoDifference };
    let (relative_pct, relative_ci_pct) =
        if mr != 0.0 { (Some(d * 100.0 / mr), Some(t * rel_var.sqrt() * 100.0 / mr)) } else { (None, None) };
    let mut notes = Vec::new();
    if vr == 0.0 && vc == 0.0 {
        notes.push(if d == 0.0 {
            "both samples are constant and equal".to_string()
        } else {
            "both samples have zero variance: the difference of two constants is exact".to_string()
        });
    }
    if mr == 0.0 {
        notes.push("the reference mean is 0: no relative difference".to_string());
    }
    Ok(Comparison {
        confidence: opts.confidence,
        method: opts.method,
        critical_values: opts.critical,
        verdict,
        dof,
        t,
        difference: d,
        difference_ci: e,
        relative_pct,
        relative_ci_pct,
        s,
        note: if notes.is_empty() { None } else { Some(notes.join("; ")) },
    })
}

/// The critical two-sided t value for `dof` degrees of freedom.
pub fn critical_value(confidence: Confidence, dof: f64, critical: CriticalValues) -> f64 {
    match critical {
        CriticalValues::Exact => (t_quantile(confidence.percent() / 100.0, dof) * 1000.0).round() / 1000.0,
        CriticalValues::MinistatTable => {
            let row = if dof.is_nan() || dof < 1.0 {
                1
            } else if dof > 100.0 {
                0
            } else {
                dof.floor() as usize
            };
            MINISTAT_T_TABLE[row][confidence.index()]
        }
    }
}

/// The two-sided Student's t quantile: the `t` with `P(|T| <= t) =
/// confidence` for `dof` degrees of freedom (which need not be an integer).
/// NaN unless `0 < confidence < 1` and `dof > 0`.
pub fn t_quantile(confidence: f64, dof: f64) -> f64 {
    if !(confidence > 0.0 && confidence < 1.0 && dof > 0.0) {
        return f64::NAN;
    }
    let alpha = 1.0 - confidence;
    // The tail P(|T| > t) falls from 1 at t = 0: bracket, then bisect.
    let mut hi = 1.0;
    while t_two_sided_tail(hi, dof) > alpha {
        hi *= 2.0;
        if hi > 1e300 {
            return f64::INFINITY;
        }
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if t_two_sided_tail(mid, dof) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// `P(|T| > t)` for Student's t with `dof` degrees of freedom:
/// `I_{dof/(dof+t^2)}(dof/2, 1/2)`.
pub fn t_two_sided_tail(t: f64, dof: f64) -> f64 {
    let x = dof / (dof + t * t);
    incomplete_beta(dof / 2.0, 0.5, x)
}

/// The regularized incomplete beta function `I_x(a, b)` (continued fraction,
/// modified Lentz; Numerical Recipes' `betai`).
pub fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const EPS: f64 = 1e-16;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..1000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, 9 terms; ~15 significant digits).
pub fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(π x).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let mut a = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// C's `printf("%.{precision}g", v)`: `precision` significant digits, fixed
/// or exponent notation (exponent < -4 or >= precision), trailing zeros
/// removed. ministat prints everything with `%g` (6 digits) or `%13.8g`.
pub fn fmt_g(v: f64, precision: usize) -> String {
    let p = precision.max(1);
    if v.is_nan() {
        return "nan".to_string();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let sci = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = sci.split_once('e').expect("exponent notation has an 'e'");
    let x: i32 = exp.parse().expect("the exponent is an integer");
    if x < -4 || x >= p as i32 {
        format!("{}e{}{:02}", strip_fraction_zeros(mantissa), if x < 0 { '-' } else { '+' }, x.abs())
    } else {
        strip_fraction_zeros(&format!("{:.*}", (p as i32 - 1 - x) as usize, v))
    }
}

fn strip_fraction_zeros(s: &str) -> String {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s.to_string() }
}

/// FreeBSD ministat's table of two-sided Student's t critical values: row 0
/// is "infinity" (normal quantiles), row `k` is `k` degrees of freedom;
/// columns follow [`CONFIDENCE_LEVELS`] (the last column holds the 0.999
/// quantile, i.e. 99.8% two-sided, although ministat labels it 99.5%).
#[allow(clippy::approx_constant)] // 2.718 is t(11) at 98%, not e.
pub const MINISTAT_T_TABLE: [[f64; 6]; 101] = [
    [1.282, 1.645, 1.960, 2.326, 2.576, 3.090],
    [3.078, 6.314, 12.706, 31.821, 63.657, 318.313],
    [1.886, 2.920, 4.303, 6.965, 9.925, 22.327],
    [1.638, 2.353, 3.182, 4.541, 5.841, 10.215],
    [1.533, 2.132, 2.776, 3.747, 4.604, 7.173],
    [1.476, 2.015, 2.571, 3.365, 4.032, 5.893],
    [1.440, 1.943, 2.447, 3.143, 3.707, 5.208],
    [1.415, 1.895, 2.365, 2.998, 3.499, 4.782],
    [1.397, 1.860, 2.306, 2.896, 3.355, 4.499],
    [1.383, 1.833, 2.262, 2.821, 3.250, 4.296],
    [1.372, 1.812, 2.228, 2.764, 3.169, 4.143],
    [1.363, 1.796, 2.201, 2.718, 3.106, 4.024],
    [1.356, 1.782, 2.179, 2.681, 3.055, 3.929],
    [1.350, 1.771, 2.160, 2.650, 3.012, 3.852],
    [1.345, 1.761, 2.145, 2.624, 2.977, 3.787],
    [1.341, 1.753, 2.131, 2.602, 2.947, 3.733],
    [1.337, 1.746, 2.120, 2.583, 2.921, 3.686],
    [1.333, 1.740, 2.110, 2.567, 2.898, 3.646],
    [1.330, 1.734, 2.101, 2.552, 2.878, 3.610],
    [1.328, 1.729, 2.093, 2.539, 2.861, 3.579],
    [1.325, 1.725, 2.086, 2.528, 2.845, 3.552],
    [1.323, 1.721, 2.080, 2.518, 2.831, 3.527],
    [1.321, 1.717, 2.074, 2.508, 2.819, 3.505],
    [1.319, 1.714, 2.069, 2.500, 2.807, 3.485],
    [1.318, 1.711, 2.064, 2.492, 2.797, 3.467],
    [1.316, 1.708, 2.060, 2.485, 2.787, 3.450],
    [1.315, 1.706, 2.056, 2.479, 2.779, 3.435],
    [1.314, 1.703, 2.052, 2.473, 2.771, 3.421],
    [1.313, 1.701, 2.048, 2.467, 2.763, 3.408],
    [1.311, 1.699, 2.045, 2.462, 2.756, 3.396],
    [1.310, 1.697, 2.042, 2.457, 2.750, 3.385],
    [1.309, 1.696, 2.040, 2.453, 2.744, 3.375],
    [1.309, 1.694, 2.037, 2.449, 2.738, 3.365],
    [1.308, 1.692, 2.035, 2.445, 2.733, 3.356],
    [1.307, 1.691, 2.032, 2.441, 2.728, 3.348],
    [1.306, 1.690, 2.030, 2.438, 2.724, 3.340],
    [1.306, 1.688, 2.028, 2.434, 2.719, 3.333],
    [1.305, 1.687, 2.026, 2.431, 2.715, 3.326],
    [1.304, 1.686, 2.024, 2.429, 2.712, 3.319],
    [1.304, 1.685, 2.023, 2.426, 2.708, 3.313],
    [1.303, 1.684, 2.021, 2.423, 2.704, 3.307],
    [1.303, 1.683, 2.020, 2.421, 2.701, 3.301],
    [1.302, 1.682, 2.018, 2.418, 2.698, 3.296],
    [1.302, 1.681, 2.017, 2.416, 2.695, 3.291],
    [1.301, 1.680, 2.015, 2.414, 2.692, 3.286],
    [1.301, 1.679, 2.014, 2.412, 2.690, 3.281],
    [1.300, 1.679, 2.013, 2.410, 2.687, 3.277],
    [1.300, 1.678, 2.012, 2.408, 2.685, 3.273],
    [1.299, 1.677, 2.011, 2.407, 2.682, 3.269],
    [1.299, 1.677, 2.010, 2.405, 2.680, 3.265],
    [1.299, 1.676, 2.009, 2.403, 2.678, 3.261],
    [1.298, 1.675, 2.008, 2.402, 2.676, 3.258],
    [1.298, 1.675, 2.007, 2.400, 2.674, 3.255],
    [1.298, 1.674, 2.006, 2.399, 2.672, 3.251],
    [1.297, 1.674, 2.005, 2.397, 2.670, 3.248],
    [1.297, 1.673, 2.004, 2.396, 2.668, 3.245],
    [1.297, 1.673, 2.003, 2.395, 2.667, 3.242],
    [1.297, 1.672, 2.002, 2.394, 2.665, 3.239],
    [1.296, 1.672, 2.002, 2.392, 2.663, 3.237],
    [1.296, 1.671, 2.001, 2.391, 2.662, 3.234],
    [1.296, 1.671, 2.000, 2.390, 2.660, 3.232],
    [1.296, 1.670, 2.000, 2.389, 2.659, 3.229],
    [1.295, 1.670, 1.999, 2.388, 2.657, 3.227],
    [1.295, 1.669, 1.998, 2.387, 2.656, 3.225],
    [1.295, 1.669, 1.998, 2.386, 2.655, 3.223],
    [1.295, 1.669, 1.997, 2.385, 2.654, 3.220],
    [1.295, 1.668, 1.997, 2.384, 2.652, 3.218],
    [1.294, 1.668, 1.996, 2.383, 2.651, 3.216],
    [1.294, 1.668, 1.995, 2.382, 2.650, 3.214],
    [1.294, 1.667, 1.995, 2.382, 2.649, 3.213],
    [1.294, 1.667, 1.994, 2.381, 2.648, 3.211],
    [1.294, 1.667, 1.994, 2.380, 2.647, 3.209],
    [1.293, 1.666, 1.993, 2.379, 2.646, 3.207],
    [1.293, 1.666, 1.993, 2.379, 2.645, 3.206],
    [1.293, 1.666, 1.993, 2.378, 2.644, 3.204],
    [1.293, 1.665, 1.992, 2.377, 2.643, 3.202],
    [1.293, 1.665, 1.992, 2.376, 2.642, 3.201],
    [1.293, 1.665, 1.991, 2.376, 2.641, 3.199],
    [1.292, 1.665, 1.991, 2.375, 2.640, 3.198],
    [1.292, 1.664, 1.990, 2.374, 2.640, 3.197],
    [1.292, 1.664, 1.990, 2.374, 2.639, 3.195],
    [1.292, 1.664, 1.990, 2.373, 2.638, 3.194],
    [1.292, 1.664, 1.989, 2.373, 2.637, 3.193],
    [1.292, 1.663, 1.989, 2.372, 2.636, 3.191],
    [1.292, 1.663, 1.989, 2.372, 2.636, 3.190],
    [1.292, 1.663, 1.988, 2.371, 2.635, 3.189],
    [1.291, 1.663, 1.988, 2.370, 2.634, 3.188],
    [1.291, 1.663, 1.988, 2.370, 2.634, 3.187],
    [1.291, 1.662, 1.987, 2.369, 2.633, 3.185],
    [1.291, 1.662, 1.987, 2.369, 2.632, 3.184],
    [1.291, 1.662, 1.987, 2.368, 2.632, 3.183],
    [1.291, 1.662, 1.986, 2.368, 2.631, 3.182],
    [1.291, 1.662, 1.986, 2.368, 2.630, 3.181],
    [1.291, 1.661, 1.986, 2.367, 2.630, 3.180],
    [1.291, 1.661, 1.986, 2.367, 2.629, 3.179],
    [1.291, 1.661, 1.985, 2.366, 2.629, 3.178],
    [1.290, 1.661, 1.985, 2.366, 2.628, 3.177],
    [1.290, 1.661, 1.985, 2.365, 2.627, 3.176],
    [1.290, 1.661, 1.984, 2.365, 2.627, 3.175],
    [1.290, 1.660, 1.984, 2.365, 2.626, 3.175],
    [1.290, 1.660, 1.984, 2.364, 2.626, 3.174],
];

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;

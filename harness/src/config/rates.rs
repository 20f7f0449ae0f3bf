//! `--qps`: one rate, a list, or a geometric range.

use super::{ConfigError, bad};

/// Parses `--qps`: `100`, `500,1000,2000` (ascending), or `500..16000x2`
/// (geometric: 500, 1000, 2000, … up to 16000).
pub fn parse_rates(text: &str) -> Result<Vec<f64>, ConfigError> {
    let number = |t: &str| -> Result<f64, ConfigError> {
        let v: f64 = t.trim().parse().map_err(|_| {
            bad("--qps", format!("{t:?} is not a number; give requests per second, e.g. --qps 100, --qps 500,1000 or --qps 500..16000x2"))
        })?;
        if !(v.is_finite() && v > 0.0) {
            return Err(bad("--qps", format!("must be a positive rate, got {}; e.g. --qps 100", t.trim())));
        }
        if v > 1_000_000.0 {
            return Err(bad("--qps", "at most 1000000 requests per second"));
        }
        Ok(v)
    };
    let rates = if let Some((from, rest)) = text.split_once("..") {
        let (to, factor) = rest
            .split_once('x')
            .ok_or_else(|| bad("--qps", format!("{text:?}: a range needs a factor, e.g. --qps 500..16000x2")))?;
        let (from, to) = (number(from)?, number(to)?);
        let factor: f64 = factor
            .trim()
            .parse()
            .ok()
            .filter(|f: &f64| f.is_finite() && *f > 1.0)
            .ok_or_else(|| bad("--qps", format!("{text:?}: the factor after 'x' must be a number above 1")))?;
        if to < from {
            return Err(bad("--qps", format!("{text:?}: the range must go up")));
        }
        let mut v = vec![from];
        // A little tolerance so 500..16000x2 ends at 16000 despite rounding.
        while v.len() <= 64 && v[v.len() - 1] * factor <= to * (1.0 + 1e-9) {
            v.push(v[v.len() - 1] * factor);
        }
        v
    } else {
        text.split(',').map(number).collect::<Result<Vec<_>, _>>()?
    };
    if rates.len() > 64 {
        return Err(bad("--qps", "at most 64 steps in a sweep"));
    }
    if rates.windows(2).any(|w| w[1] <= w[0]) {
        return Err(bad("--qps", format!("{text:?}: the rates of a sweep must go up")));
    }
    Ok(rates)
}

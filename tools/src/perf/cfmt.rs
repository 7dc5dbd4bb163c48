//! A small C `printf` for perftest's format strings, so the tables are written
//! with the very format macros of perftest (copied verbatim into report.rs)
//! and line up byte for byte: flags `-`, `0`, `#`, width, precision, length
//! modifiers (ignored), conversions `d i u x s f g c %`.

/// One argument of [`sprintf`].
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    U(u64),
    F(f64),
    S(&'a str),
}

#[derive(Default)]
struct Spec {
    left: bool,
    zero: bool,
    alt: bool,
    width: usize,
    precision: Option<usize>,
}

/// Formats `fmt` with `args` as C's `sprintf` would. A conversion with no
/// argument left prints nothing.
pub fn sprintf(fmt: &str, args: &[Arg]) -> String {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.left = true,
                '0' => spec.zero = true,
                '#' => spec.alt = true,
                '+' | ' ' => {}
                _ => break,
            }
            chars.next();
        }
        spec.width = digits(&mut chars).unwrap_or(0);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.precision = Some(digits(&mut chars).unwrap_or(0));
        }
        while matches!(chars.peek(), Some('h' | 'l' | 'L' | 'q' | 'j' | 'z' | 't')) {
            chars.next();
        }
        let Some(conv) = chars.next() else { break };
        if conv == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.next() else { continue };
        out.push_str(&convert(conv, &spec, *arg));
    }
    out
}

fn digits(chars: &mut std::iter::Peekable<std::str::Chars>) -> Option<usize> {
    let mut n: Option<usize> = None;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        n = Some(n.unwrap_or(0) * 10 + d as usize);
        chars.next();
    }
    n
}

fn convert(conv: char, spec: &Spec, arg: Arg) -> String {
    let (sign, body, prefix) = match (conv, arg) {
        ('x', a) => {
            let v = as_u64(a);
            let prefix = if spec.alt && v != 0 { "0x" } else { "" };
            ("", format!("{v:x}"), prefix)
        }
        ('d' | 'i' | 'u', a) => {
            let v = as_i128(a);
            (if v < 0 { "-" } else { "" }, v.unsigned_abs().to_string(), "")
        }
        ('f', a) => float(as_f64(a), |m| format!("{m:.*}", spec.precision.unwrap_or(6))),
        ('g', a) => float(as_f64(a), |m| general(m, spec.precision.unwrap_or(6))),
        ('c', Arg::U(v)) => ("", char::from_u32(v as u32).unwrap_or('?').to_string(), ""),
        (_, Arg::S(s)) => ("", s.chars().take(spec.precision.unwrap_or(usize::MAX)).collect(), ""),
        (_, a) => ("", format!("{a:?}"), ""),
    };
    pad(spec, sign, prefix, &body, !matches!(arg, Arg::S(_)))
}

/// Sign and digits of a float, with C's spelling of the special values.
fn float(v: f64, digits: impl Fn(f64) -> String) -> (&'static str, String, &'static str) {
    let sign = if v.is_sign_negative() && v != 0.0 { "-" } else { "" };
    let m = v.abs();
    let body = if m.is_nan() {
        "nan".to_string()
    } else if m.is_infinite() {
        "inf".to_string()
    } else {
        digits(m)
    };
    (sign, body, "")
}

fn pad(spec: &Spec, sign: &str, prefix: &str, body: &str, numeric: bool) -> String {
    let len = sign.len() + prefix.len() + body.chars().count();
    let fill = spec.width.saturating_sub(len);
    if spec.left {
        format!("{sign}{prefix}{body}{}", " ".repeat(fill))
    } else if spec.zero && numeric && !body.starts_with(['n', 'i']) {
        format!("{sign}{prefix}{}{body}", "0".repeat(fill))
    } else {
        format!("{}{sign}{prefix}{body}", " ".repeat(fill))
    }
}

/// `%g` of a non-negative finite value: `precision` significant digits, the
/// shorter of fixed and exponent notation, trailing zeros removed.
fn general(m: f64, precision: usize) -> String {
    let p = precision.max(1);
    if m == 0.0 {
        return "0".to_string();
    }
    let sci = format!("{m:.*e}", p - 1);
    let exp: i32 = sci.split_once('e').map(|(_, e)| e.parse().unwrap_or(0)).unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let (mantissa, _) = sci.split_once('e').unwrap_or((&sci, ""));
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim_zeros(mantissa), exp.abs())
    } else {
        trim_zeros(&format!("{m:.*}", (p as i32 - 1 - exp).max(0) as usize)).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn as_u64(a: Arg) -> u64 {
    match a {
        Arg::U(v) => v,
        Arg::F(v) => v as u64,
        Arg::S(_) => 0,
    }
}

fn as_i128(a: Arg) -> i128 {
    match a {
        Arg::U(v) => i128::from(v),
        Arg::F(v) => v as i128,
        Arg::S(_) => 0,
    }
}

fn as_f64(a: Arg) -> f64 {
    match a {
        Arg::U(v) => v as f64,
        Arg::F(v) => v,
        Arg::S(_) => 0.0,
    }
}

/// The text of a C string: the bytes before the first NUL.
pub fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::{sprintf, Arg};

    // Expected strings were printed by glibc's printf with the same formats.
    #[test]
    fn integers_and_alternate_hex() {
        assert_eq!(
            sprintf("%#04x|%#06x|%#08x|%#016llx", &[Arg::U(0), Arg::U(0x11), Arg::U(0x1e8), Arg::U(0x7f8b5c5f4000)]),
            "0000|0x0011|0x0001e8|0x007f8b5c5f4000"
        );
        assert_eq!(
            sprintf("%04x:%06x:%016llx:%02x", &[Arg::U(0), Arg::U(0xabc), Arg::U(1), Arg::U(255)]),
            "0000:000abc:0000000000000001:ff"
        );
        assert_eq!(sprintf("%02d:%02d:%d%%", &[Arg::U(0), Arg::U(255), Arg::F(-3.0)]), "00:255:-3%");
        assert_eq!(
            sprintf("[%-7lu][%-10lu][%lu]", &[Arg::U(65536), Arg::U(5000), Arg::U(7)]),
            "[65536  ][5000      ][7]"
        );
    }

    #[test]
    fn floats_fixed_and_general() {
        assert_eq!(
            sprintf("[%-7.2lf][%-7.6lf][%.2f]", &[Arg::F(1049.655), Arg::F(0.016794), Arg::F(2.0)]),
            "[1049.65][0.016794][2.00]"
        );
        assert_eq!(sprintf("[%-7.2f]", &[Arg::F(3.5)]), "[3.50   ]");
        assert_eq!(
            sprintf(
                "%g %g %g %g %g",
                &[Arg::F(2.5), Arg::F(123456.0), Arg::F(1234567.0), Arg::F(0.0001), Arg::F(0.00001234)]
            ),
            "2.5 123456 1.23457e+06 0.0001 1.234e-05"
        );
        assert_eq!(sprintf("%lf %s", &[Arg::F(f64::NAN), Arg::S("x")]), "nan x");
        let ties = [Arg::F(0.125), Arg::F(0.375), Arg::F(0.25), Arg::F(0.05)];
        assert_eq!(sprintf("%.2f %.2f %.1f %.1f", &ties), "0.12 0.38 0.2 0.1");
    }
}

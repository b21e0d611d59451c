//! Numbers and strings for people and for XML: the one copy of the formatting helpers that
//! the heap maps, the `memo` CLI and memo-bench's report share, so that a size reads the
//! same wherever it is printed.

/// Bytes in a mebibyte.
const MIB: u64 = 1 << 20;

/// `1234567` as `1,234,567`.
pub fn thousands(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `v` bytes in mebibytes with two decimals (rounded half up) and thousands separators:
/// `1515472556` as `1,445.27`.
pub fn mib(v: u64) -> String {
    let hundredths = (u128::from(v) * 100 + u128::from(MIB / 2)) / u128::from(MIB);
    // At most (2^64 - 1) * 100 / 2^20 + 1 hundredths: the whole part fits a u64.
    let whole = (hundredths / 100) as u64;
    format!("{}.{:02}", thousands(whole), hundredths % 100)
}

/// `v` bytes exactly and in mebibytes: `1,515,472,556 B (1,445.27 MiB)`.
pub fn bytes_and_mib(v: u64) -> String {
    format!("{} B ({} MiB)", thousands(v), mib(v))
}

/// A size in the largest binary unit that keeps it at least 1, to about three significant
/// digits: `8 B`, `1.5 KiB`, `32 MiB`, `16 EiB` (a float, so that 2^64 has a name too).
pub fn short_size(bytes: f64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes;
    let mut k = 0;
    while v >= 1024.0 && k + 1 < UNITS.len() {
        v /= 1024.0;
        k += 1;
    }
    let digits = if k == 0 || v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{} {}", trim_float(v, digits), UNITS[k])
}

/// `v` with at most `digits` decimals, trailing zeros (and a bare point) removed.
pub fn trim_float(v: f64, digits: usize) -> String {
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Escapes text for XML content and attribute values; characters XML 1.0 does not allow
/// become U+FFFD.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(1515472556), "1,515,472,556");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn mebibytes_round_half_up_and_carry() {
        assert_eq!(mib(0), "0.00");
        assert_eq!(mib(12), "0.00");
        assert_eq!(mib(1 << 20), "1.00");
        assert_eq!(mib(1515472556), "1,445.27");
        // 128 KiB is 0.125 MiB exactly: half up.
        assert_eq!(mib(1 << 17), "0.13");
        // 1.999 MiB rounds to the next whole mebibyte.
        assert_eq!(mib((1 << 21) - 1024), "2.00");
        assert_eq!(mib(u64::MAX), "17,592,186,044,416.00");
        assert_eq!(bytes_and_mib(1515472556), "1,515,472,556 B (1,445.27 MiB)");
        assert_eq!(bytes_and_mib(12), "12 B (0.00 MiB)");
    }

    #[test]
    fn short_sizes_keep_about_three_digits() {
        assert_eq!(short_size(0.0), "0 B");
        assert_eq!(short_size(8.0), "8 B");
        assert_eq!(short_size(1000.0), "1000 B");
        assert_eq!(short_size(1536.0), "1.5 KiB");
        assert_eq!(short_size(1234.0), "1.21 KiB");
        assert_eq!(short_size(12.5 * 1024.0), "12.5 KiB");
        assert_eq!(short_size(32.0 * MIB as f64), "32 MiB");
        assert_eq!(short_size(2f64.powi(64)), "16 EiB");
        // Powers of two (histogram bucket bounds) print as whole numbers of their unit.
        for k in 0..=64 {
            let s = short_size(2f64.powi(k));
            let number = s.split(' ').next().unwrap();
            assert!(number.parse::<u64>().is_ok(), "2^{k}: {s}");
        }
        assert_eq!(trim_float(2.0, 2), "2");
        assert_eq!(trim_float(2.50, 2), "2.5");
        assert_eq!(trim_float(100.0, 0), "100");
    }

    #[test]
    fn escapes_markup_quotes_and_forbidden_characters() {
        assert_eq!(
            xml_escape("a<b>&\"c'\td\u{1}"),
            "a&lt;b&gt;&amp;&quot;c&apos;\td\u{FFFD}"
        );
        assert_eq!(xml_escape("glibc"), "glibc");
    }
}

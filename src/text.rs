//! How a value that came from a user or a service shows in a message: on one line, control
//! characters escaped, cut to a readable length (a 10 MB argument is not copied whole).

/// Characters of a value shown, at most.
pub const MAX_CHARS: usize = 60;
/// What ends a value that was cut.
pub const CUT: char = '…';

/// `s` fit for a one-line message.
#[must_use]
pub fn shown(s: &str) -> String {
    shown_within(s, MAX_CHARS)
}

/// `s` on one line, its control characters escaped, cut to `max` characters (then ended by
/// [`CUT`]).
#[must_use]
pub fn shown_within(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max * 4));
    for (n, c) in s.chars().enumerate() {
        if n == max {
            out.push(CUT);
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `n` with its thousands grouped by commas, as messages write counts: `10,000`.
#[must_use]
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(thousands(1), "1");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(1_000_000_000), "1,000,000,000");
    }

    #[test]
    fn long_and_control_values_are_cut_and_escaped() {
        assert_eq!(shown("a\nb"), "a\\nb");
        let long = shown(&"x".repeat(10_000));
        assert_eq!(long.chars().count(), MAX_CHARS + 1);
        assert!(long.ends_with('…'));
    }
}

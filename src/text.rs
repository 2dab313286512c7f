//! How a value that came from a user or a service shows in a message: on one line, control
//! characters escaped, cut to a readable length (a 10 MB argument is not copied whole).

/// Characters of a value shown, at most.
const MAX_CHARS: usize = 60;

/// `s` fit for a one-line message.
#[must_use]
pub fn shown(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_CHARS * 4));
    for (n, c) in s.chars().enumerate() {
        if n == MAX_CHARS {
            out.push('…');
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_and_control_values_are_cut_and_escaped() {
        assert_eq!(shown("a\nb"), "a\\nb");
        let long = shown(&"x".repeat(10_000));
        assert_eq!(long.chars().count(), MAX_CHARS + 1);
        assert!(long.ends_with('…'));
    }
}

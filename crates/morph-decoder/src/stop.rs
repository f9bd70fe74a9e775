//! Stop strings (the OpenAI API's `stop`): a generation's text is scanned as it grows; text
//! that could still turn into a stop string is held back until it cannot, and at the first stop
//! string the text is cut before it and the generation ends.

/// What a piece of fresh text gives the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scanned {
    /// Text that can no longer be part of a stop string.
    Text(String),
    /// A stop string appeared: the text before it, and the generation ends there.
    Stopped(String),
}

/// One generation's scan of its text for its stop strings.
#[derive(Debug, Clone, Default)]
pub struct StopScan {
    stops: Vec<String>,
    /// Text not given out yet: its end may be the start of a stop string.
    held: String,
}

impl StopScan {
    /// A scan for `stops` (empty strings are ignored; none: every text passes at once).
    pub fn new(stops: Vec<String>) -> Self {
        Self { stops: stops.into_iter().filter(|s| !s.is_empty()).collect(), held: String::new() }
    }

    /// Adds `fresh` text to the scan (given back as it is when there are no stop strings).
    pub fn push(&mut self, fresh: String) -> Scanned {
        if self.stops.is_empty() {
            return Scanned::Text(fresh);
        }
        self.held.push_str(&fresh);
        // Text given out before could not start a stop string, so the first one is in `held`.
        if let Some(at) = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min() {
            self.held.truncate(at);
            return Scanned::Stopped(std::mem::take(&mut self.held));
        }
        let kept = self.stops.iter().map(|s| partial_stop(&self.held, s)).max().unwrap_or(0);
        let out: String = self.held.drain(..self.held.len() - kept).collect();
        Scanned::Text(out)
    }

    /// Held text, given out when the generation ends without a stop string.
    pub fn flush(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

/// The length of the longest end of `text` that is a proper start of `stop`.
fn partial_stop(text: &str, stop: &str) -> usize {
    (1..stop.len().min(text.len() + 1))
        .rev()
        .find(|&n| stop.is_char_boundary(n) && text.ends_with(&stop[..n]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut scan = StopScan::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for piece in pieces {
            match scan.push(piece.to_string()) {
                Scanned::Text(t) => out.push_str(&t),
                Scanned::Stopped(t) => return (out + &t, true),
            }
        }
        (out + &scan.flush(), false)
    }

    #[test]
    fn text_is_cut_before_the_first_stop_string_even_across_pieces() {
        assert_eq!(scan(&[], &["a", "b"]), ("ab".into(), false));
        assert_eq!(scan(&["\n"], &["one", " two\nthree"]), ("one two".into(), true));
        assert_eq!(scan(&["END"], &["x E", "N", "D y"]), ("x ".into(), true));
        // Two stops: the earlier in the text wins, whichever is listed first.
        assert_eq!(scan(&["zz", "b"], &["abzz"]), ("a".into(), true));
        // A partial match that does not complete is given out, at the latest at the end.
        assert_eq!(scan(&["END"], &["x EN", "d"]), ("x ENd".into(), false));
        assert_eq!(scan(&["END"], &["x EN"]), ("x EN".into(), false));
        assert_eq!(scan(&["é!"], &["café", " ok"]), ("café ok".into(), false));
    }

    #[test]
    fn text_that_may_become_a_stop_is_held_and_the_rest_given_out_at_once() {
        let mut scan = StopScan::new(vec!["</s>".into()]);
        assert_eq!(scan.push("hello <".into()), Scanned::Text("hello ".into()));
        assert_eq!(scan.push("/".into()), Scanned::Text(String::new()));
        assert_eq!(scan.push("x".into()), Scanned::Text("</x".into()));
    }
}

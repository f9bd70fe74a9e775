//! One Prometheus exposition from a several-model server's: each model's own (its server's
//! recorder) with a `model` label on every series, and the server's own (the core controller,
//! calls no model took, the process), each family's `# HELP` and `# TYPE` once and its series
//! together, as the text format requires.

/// A family's header lines and its series, in the order first seen.
#[derive(Debug, Default)]
struct Family {
    header: Vec<String>,
    series: Vec<String>,
}

/// Families by name, in the order first seen.
#[derive(Debug, Default)]
struct Families(Vec<(String, Family)>);

impl Families {
    fn entry(&mut self, name: &str) -> &mut Family {
        let at = match self.0.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                self.0.push((name.to_string(), Family::default()));
                self.0.len() - 1
            }
        };
        &mut self.0[at].1
    }

    /// Adds `text`'s families, each series labelled `model="…"` when `model` is given; families
    /// whose name starts with `skip` are left out.
    fn add(&mut self, text: &str, model: Option<&str>, skip: Option<&str>) {
        let mut current = String::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if let Some(rest) = line.strip_prefix("# ") {
                let name = rest.split_whitespace().nth(1).unwrap_or_default();
                current = name.to_string();
                if skip.is_some_and(|s| name.starts_with(s)) {
                    continue;
                }
                let family = self.entry(name);
                if !family.header.iter().any(|h| h == line) {
                    family.header.push(line.to_string());
                }
                continue;
            }
            if skip.is_some_and(|s| current.starts_with(s)) {
                continue;
            }
            let series = model.map_or_else(|| line.to_string(), |m| labelled(line, m));
            self.entry(&current).series.push(series);
        }
    }

    fn render(self) -> String {
        let mut out = String::new();
        for (_, family) in self.0 {
            for line in family.header.iter().chain(&family.series) {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// A series line with `model="NAME"` as its first label.
fn labelled(line: &str, model: &str) -> String {
    let value = model.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    match line.find(['{', ' ']) {
        Some(at) if line.as_bytes()[at] == b'{' => {
            let rest = &line[at + 1..];
            let comma = if rest.starts_with('}') { "" } else { "," };
            format!("{}{{model=\"{value}\"{comma}{rest}", &line[..at])
        }
        Some(at) => format!("{}{{model=\"{value}\"}}{}", &line[..at], &line[at..]),
        None => line.to_string(),
    }
}

/// The families every model's recorder repeats for the one process: the server's own copy
/// stands for them.
const PROCESS: &str = "process_";

/// `own` (the server's series, unlabelled) and each `(model, exposition)` merged.
pub fn merge(own: &str, models: &[(String, String)]) -> String {
    let mut families = Families::default();
    families.add(own, None, None);
    for (model, text) in models {
        families.add(text, Some(model), Some(PROCESS));
    }
    families.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_models_series_carry_its_name_and_each_family_is_described_once() {
        let embed = "# HELP morph_requests_total Calls.\n# TYPE morph_requests_total counter\n\
                     morph_requests_total{route=\"/embed\",status=\"200\"} 3\n\n\
                     # TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 9\n";
        let chat = "# HELP morph_requests_total Calls.\n# TYPE morph_requests_total counter\n\
                    morph_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1\n\
                    # TYPE morph_queue_sequences gauge\nmorph_queue_sequences 0\n";
        let own = "# TYPE morph_model_threads gauge\nmorph_model_threads{model=\"a\"} 1.5\n\
                   # TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 9\n";
        let out = merge(own, &[("a".into(), embed.into()), ("b\"c".into(), chat.into())]);
        assert_eq!(
            out,
            "# TYPE morph_model_threads gauge\nmorph_model_threads{model=\"a\"} 1.5\n\
             # TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 9\n\
             # HELP morph_requests_total Calls.\n# TYPE morph_requests_total counter\n\
             morph_requests_total{model=\"a\",route=\"/embed\",status=\"200\"} 3\n\
             morph_requests_total{model=\"b\\\"c\",route=\"/v1/chat/completions\",status=\"200\"} 1\n\
             # TYPE morph_queue_sequences gauge\nmorph_queue_sequences{model=\"b\\\"c\"} 0\n"
        );
    }

    #[test]
    fn a_series_of_empty_labels_takes_the_model_alone() {
        assert_eq!(labelled("x{} 1", "m"), "x{model=\"m\"} 1");
        assert_eq!(labelled("x_bucket{le=\"0.5\"} 2", "m"), "x_bucket{model=\"m\",le=\"0.5\"} 2");
    }
}

//! Request texts for the load generator, read from a file by its format:
//! `.tsv` (SST-2: `label<TAB>sentence`, header skipped), `.csv` (AG News:
//! `"class","title","description"`), `.jsonl` (ShareGPT: the first user turn), `SMSSpamCollection`
//! style `label<TAB>text` without header, or anything else as one text per line.

use std::path::Path;

use super::WorkloadError;

/// The texts of a corpus file, in file order.
pub fn load(path: &Path) -> Result<Vec<String>, WorkloadError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| WorkloadError::Invalid(format!("reading corpus {}: {e}", path.display())))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let texts: Vec<String> = match ext {
        "jsonl" => text.lines().filter_map(first_user_turn).collect(),
        "csv" => text.lines().filter_map(csv_title_and_description).collect(),
        "tsv" => text.lines().skip(1).filter_map(after_tab).collect(),
        _ if text.lines().next().is_some_and(|l| l.starts_with("ham\t") || l.starts_with("spam\t")) => {
            text.lines().filter_map(after_tab).collect()
        }
        _ => text.lines().map(str::to_string).collect(),
    };
    let texts: Vec<String> = texts.into_iter().filter(|t| !t.trim().is_empty()).collect();
    if texts.is_empty() {
        return Err(WorkloadError::Invalid(format!("corpus {} has no usable texts", path.display())));
    }
    Ok(texts)
}

fn after_tab(line: &str) -> Option<String> {
    line.split_once('\t').map(|(_, t)| t.to_string())
}

fn first_user_turn(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    v["turns"][0]["content"].as_str().map(str::to_string)
}

/// `"3","Title","Description"` → `Title. Description` (quotes inside fields are doubled).
fn csv_title_and_description(line: &str) -> Option<String> {
    let fields: Vec<String> = line
        .trim()
        .trim_start_matches('"')
        .trim_end_matches('"')
        .split("\",\"")
        .map(|f| f.replace("\"\"", "\""))
        .collect();
    match fields.as_slice() {
        [_, title, description] => Some(format!("{title}. {description}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_format() {
        assert_eq!(after_tab("1\tgood movie"), Some("good movie".into()));
        assert_eq!(
            csv_title_and_description(r#""3","Wall St. ""Bears""","Shares fell.""#),
            Some(r#"Wall St. "Bears". Shares fell."#.into())
        );
        assert_eq!(
            first_user_turn(r#"{"id":"x","turns":[{"role":"user","content":"hello"}]}"#),
            Some("hello".into())
        );
    }
}

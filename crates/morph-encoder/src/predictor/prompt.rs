//! What the length predictor reads (§3.1): a round's earlier prompts and responses followed by
//! its prompt, cut to the last 512 tokens.

/// The predictor's input for a round: the earlier turns' contents, then the prompt (§3.1).
pub fn predictor_text<'a>(history: impl IntoIterator<Item = &'a str>, prompt: &str) -> String {
    let mut parts: Vec<&str> = history.into_iter().collect();
    parts.push(prompt);
    parts.join("\n")
}

/// Token ids cut to their last `max_len` tokens (§3.1: "keep the last 512"), keeping the
/// leading `[CLS]` and trailing `[SEP]` of an encoded sequence.
pub fn keep_last(ids: &[u32], max_len: usize) -> Vec<u32> {
    if ids.len() <= max_len || max_len < 2 || ids.len() < 2 {
        return ids.to_vec();
    }
    let body = &ids[1..ids.len() - 1];
    let mut out = vec![ids[0]];
    out.extend_from_slice(&body[body.len() - (max_len - 2)..]);
    out.push(ids[ids.len() - 1]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_tokens_between_cls_and_sep() {
        assert_eq!(keep_last(&[101, 1, 2, 3, 4, 102], 4), vec![101, 3, 4, 102]);
        assert_eq!(keep_last(&[101, 1, 102], 4), vec![101, 1, 102]);
    }
}

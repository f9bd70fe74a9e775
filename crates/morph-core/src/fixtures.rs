//! What tests across the workspace share (the `fixtures` feature; never in a build that serves).

/// Token ids drawn from a fixed-seed generator: [CLS], `len − 2` ids from the vocabulary, [SEP].
pub fn random_ids(len: usize, seed: u64) -> Vec<u32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut ids = vec![101];
    for _ in 0..len - 2 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ids.push(1000 + ((state >> 33) % 29_000) as u32);
    }
    ids.push(102);
    ids
}

//! Int8 calibration: each weight product's input measured on 40 sentences of ordinary text
//! (news, reviews, questions, instructions, chat; written for Morph), for the outlier channels
//! split into copies in range ([`crate::onnx::outliers`]). It runs the fp32 graph once per sentence (no
//! padding) and keeps each channel's largest |value|.

use ort::session::Session;
use ort::value::Tensor;

use crate::checkpoint::Checkpoint;
use crate::onnx::outliers::{Outliers, Product, Site};
use crate::onnx::{ATTENTION_MASK, GraphOutput, GraphSpec, INPUT_IDS, Precision, encoder_graph, input_max};
use crate::ort_session::session;
use crate::pooling::Pooling;
use crate::tokenize::TextTokenizer;
use morph_engine::EngineError;

/// The calibration sentences, one per line.
const CALIBRATION_TEXT: &str = include_str!("../assets/calibration.txt");

/// Threads the calibration session uses.
const THREADS: usize = 2;

/// Each weight product's outlier input channels of `checkpoint` (fp32) on the calibration text.
pub fn calibrate(
    env: &ort::environment::Environment,
    checkpoint: &Checkpoint,
    tokenizer: &TextTokenizer,
) -> Result<Outliers, EngineError> {
    let layers = checkpoint.config.num_hidden_layers;
    let spec = GraphSpec {
        output: GraphOutput::InputMaxima,
        precision: Precision::Fp32,
        ..GraphSpec::pooled(None, Pooling::Mean, layers)
    };
    let mut run = session(env, &encoder_graph(checkpoint, &spec)?.to_model_bytes(), THREADS, &[])?;
    let positions = checkpoint.config.max_position_embeddings;
    // `[layer][product]` channel maxima, grown to each output's width on first sight.
    let mut maxima = vec![vec![Vec::<f32>::new(); Product::ALL.len()]; layers];
    for line in CALIBRATION_TEXT.lines().filter(|l| !l.trim().is_empty()) {
        let ids: Vec<i64> = tokenizer.encode(line)?.into_iter().take(positions).map(i64::from).collect();
        let seen = sentence_maxima(&mut run, &ids, layers)?;
        for (kept, seen) in maxima.iter_mut().flatten().zip(seen.iter().flatten()) {
            kept.resize(seen.len(), 0.0);
            kept.iter_mut().zip(seen).for_each(|(m, v)| *m = m.max(*v));
        }
    }
    Ok(Outliers::from_maxima(&maxima))
}

/// One sentence's channel maxima, `[layer][product]`.
fn sentence_maxima(run: &mut Session, ids: &[i64], layers: usize) -> Result<Vec<Vec<Vec<f32>>>, EngineError> {
    let fail = |e: ort::Error| EngineError::Inference(format!("int8 calibration: {e}"));
    let shape = [1usize, ids.len()];
    let feed = ort::inputs![
        INPUT_IDS => Tensor::from_array((shape, ids.to_vec())).map_err(fail)?,
        ATTENTION_MASK => Tensor::from_array((shape, vec![1i64; ids.len()])).map_err(fail)?,
    ];
    let outputs = run.run(feed).map_err(fail)?;
    (0..layers)
        .map(|layer| {
            Product::ALL
                .iter()
                .map(|&product| {
                    let name = input_max(Site { layer, product });
                    let (_, values) = outputs[name.as_str()].try_extract_tensor::<f32>().map_err(fail)?;
                    Ok(values.to_vec())
                })
                .collect()
        })
        .collect()
}

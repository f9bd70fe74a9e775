use morph_core::RuntimeSpec;
use morph_engine::fetch::{Pip, fetch, morph_home};
use morph_engine::ort_library::onnxruntime_library;
use morph_engine::{ModelSource, OrtEncoder, Pooling};
fn main() {
    let home = morph_home();
    let files = fetch(&ModelSource::Default, &home).unwrap();
    let library = onnxruntime_library(None, &home, &Pip::from_env()).unwrap();
    let ort = OrtEncoder::load(&files, Pooling::Mean, &library).unwrap();
    std::fs::write("/tmp/m_fixed_1x128.onnx", ort.model_bytes(RuntimeSpec::fixed(128, 1)).unwrap()).unwrap();
    std::fs::write("/tmp/m_dyn.onnx", ort.model_bytes(RuntimeSpec::dynamic(512, 8)).unwrap()).unwrap();
}

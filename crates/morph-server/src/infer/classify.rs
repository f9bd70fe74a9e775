//! OTAS's tasks on the served encoder: each input pooled under the service class of its call, so
//! a policy that weighs them (`otas`) chooses the batch's token plan, then classified by the
//! task's head for that plan.

use morph_core::TokenPlan;

use super::embed::Embedder;
use super::valid::{EmbedInputs, Truncation, ValidClassify};
use crate::error::CallError;

/// A classification call's answers: each input's label and scores, with the plan its batch ran.
#[derive(Debug)]
pub struct Classified {
    pub answers: Vec<(morph_encoder::tasks::served::Classified, TokenPlan)>,
    pub tokens: usize,
}

impl Embedder {
    /// Classifies the call's inputs with its task's head; a task the server lacks is a 404 naming
    /// the tasks served.
    pub async fn classify(&self, call: ValidClassify) -> Result<Classified, CallError> {
        let Some(heads) = self.heads.as_deref() else {
            return Err(CallError::UnknownTask {
                asked: call.task,
                served: "none (the task heads read all-MiniLM-L6-v2, not this server's model)".into(),
            });
        };
        let Some(task) = heads.find(&call.task) else {
            let served = heads.tasks().iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ");
            return Err(CallError::UnknownTask { asked: call.task, served });
        };
        let class = call.class(task);
        let inputs = EmbedInputs::Texts(call.texts);
        let (pooled, tokens) =
            self.pool(inputs, call.field, Truncation::end_if(call.truncate), Some(class)).await?;
        let answers = pooled
            .iter()
            .map(|p| heads.classify(task, p.plan, &p.vector).map(|a| (a, p.plan)).map_err(CallError::Engine))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Classified { answers, tokens })
    }
}

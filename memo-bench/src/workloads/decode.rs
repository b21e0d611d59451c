//! LLM decoding as a workload: a request is a prefill of its prompt, then `steps` decoding
//! steps, each attending to a KV cache that grows by one token per step. Two forms, as a
//! serving loop writes them:
//!
//! - `step`: each pass is one position of a request (the prefill, then one step per
//!   pass), all under one pass key, as a user who has not read about shape classes writes
//!   it. The cache escapes every pass and is freed in the next (when the step that grows
//!   it replaces it); every pass has another shape.
//! - `request`: each pass is a whole request; the cache lives and dies inside it, and
//!   every pass is the same.
//!
//! The synthetic family (`decode:<form>[:bN][:sP][:nK]`) runs GPT-2-small's layer table in
//! the interpreter (prefill: [`nets::gpt2_prefill`], steps: [`nets::gpt2_decode`]).

use super::graph::Graph;
use super::nets;

/// How a decoding request maps to passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeForm {
    /// One pass per position: the prefill, then each step.
    Step,
    /// One pass per request.
    Request,
}

impl DecodeForm {
    /// Both forms.
    pub const ALL: [DecodeForm; 2] = [DecodeForm::Step, DecodeForm::Request];

    /// Name in workload specs (`step`, `request`).
    pub fn name(self) -> &'static str {
        match self {
            DecodeForm::Step => "step",
            DecodeForm::Request => "request",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<DecodeForm> {
        DecodeForm::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The position in its request of pass number `pass` (0: the prefill), for requests of
    /// `steps` steps in the step form; the request form's passes are whole requests.
    pub fn position(self, pass: u64, steps: usize) -> usize {
        match self {
            DecodeForm::Step => (pass % (steps as u64 + 1)) as usize,
            DecodeForm::Request => 0,
        }
    }
}

/// A synthetic decoding workload: GPT-2-small, a prompt, steps, a form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecodeSpec {
    /// How requests map to passes.
    pub form: DecodeForm,
    /// Requests decoded together (batch size).
    pub batch: usize,
    /// Prompt tokens (the prefill's length).
    pub prompt: usize,
    /// Decoding steps after the prefill.
    pub steps: usize,
}

/// Default prompt length and steps of a request.
pub const DEFAULT_PROMPT: usize = 64;
/// Default decoding steps of a request.
pub const DEFAULT_STEPS: usize = 32;

impl DecodeSpec {
    /// Parses what follows `decode:`: `<form>[:bN][:sP][:nK]` (e.g. `step`,
    /// `request:b1:s64:n32`).
    pub fn parse(s: &str) -> Result<DecodeSpec, String> {
        let mut parts = s.split(':');
        let form_name = parts.next().unwrap_or_default();
        let form = DecodeForm::parse(form_name).ok_or_else(|| {
            format!("unknown decoding form {form_name:?} in \"decode:{s}\" (want step or request)")
        })?;
        let mut spec = DecodeSpec {
            form,
            batch: 1,
            prompt: DEFAULT_PROMPT,
            steps: DEFAULT_STEPS,
        };
        for p in parts {
            let (k, v) = p.split_at(1.min(p.len()));
            match (k, v.parse::<usize>()) {
                ("b", Ok(v)) if v > 0 => spec.batch = v,
                ("s", Ok(v)) if v > 0 => spec.prompt = v,
                ("n", Ok(v)) if v > 0 => spec.steps = v,
                _ => {
                    return Err(format!(
                        "bad {p:?} in workload \"decode:{s}\" (want bN, sP or nK)"
                    ))
                }
            }
        }
        Ok(spec)
    }

    /// The canonical name, without the `decode:` prefix.
    pub fn name(&self) -> String {
        format!(
            "{}:b{}:s{}:n{}",
            self.form.name(),
            self.batch,
            self.prompt,
            self.steps
        )
    }

    /// The prefill's graph and each step's (step `i` attends to `prompt + i` cached
    /// tokens).
    pub fn graphs(&self) -> (Graph, Vec<Graph>) {
        let prefill = nets::gpt2_prefill(self.batch, self.prompt);
        let steps = (0..self.steps)
            .map(|i| nets::gpt2_decode(self.batch, self.prompt + i))
            .collect();
        (prefill, steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_defaults_and_round_trip() {
        let s = DecodeSpec::parse("step").unwrap();
        assert_eq!(s.name(), "step:b1:s64:n32");
        for name in ["request:b2:s16:n4", "step:b1:s8:n3"] {
            assert_eq!(DecodeSpec::parse(name).unwrap().name(), name);
        }
        assert!(DecodeSpec::parse("greedy")
            .unwrap_err()
            .contains("step or request"));
        assert!(DecodeSpec::parse("step:n0").is_err());
        assert!(DecodeSpec::parse("step:x3").is_err());
    }

    #[test]
    fn a_request_is_a_prefill_then_steps_over_a_growing_cache() {
        let spec = DecodeSpec::parse("step:b1:s8:n3").unwrap();
        let (prefill, steps) = spec.graphs();
        assert_eq!(steps.len(), 3);
        // The prefill's outputs: the last position's logits, then 12 layers' keys and
        // values of the prompt.
        assert_eq!(prefill.outputs.len(), 1 + 2 * 12);
        assert_eq!(prefill.shapes[prefill.outputs[1]], [1, 12, 8, 64]);
        assert_eq!(prefill.shapes[prefill.outputs[0]], [1, 1, 50257]);
        for (i, g) in steps.iter().enumerate() {
            // Inputs: the token, then the cache of `prompt + i` tokens; outputs: logits,
            // then the cache one token longer.
            assert_eq!(g.inputs.len(), 1 + 2 * 12);
            assert_eq!(g.shapes[g.inputs[1]], [1, 12, 8 + i, 64]);
            assert_eq!(g.shapes[g.outputs[1]], [1, 12, 9 + i, 64]);
        }
        assert_eq!(
            (0..9)
                .map(|p| DecodeForm::Step.position(p, 3))
                .collect::<Vec<_>>(),
            [0, 1, 2, 3, 0, 1, 2, 3, 0]
        );
        assert_eq!(DecodeForm::Request.position(5, 3), 0);
    }
}

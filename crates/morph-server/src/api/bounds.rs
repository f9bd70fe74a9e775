//! The default and bounds of a number field, and the default of a true-or-false one, stated once
//! as a unit type of [`super::field_types`] that the request types name: each family's checks
//! apply them, and the OpenAPI document shows them as the field's `default`, `minimum` and
//! `maximum`.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};

use super::fields::{Flag, Number};
use crate::error::CallError;

/// What a number field takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// The value when the field is absent; `None`: absence means something of its own (no seed).
    pub default: Option<f64>,
    pub min: f64,
    /// Infinite where the bound is the served model's (`max_tokens`: its context), checked by
    /// [`Range::up_to`].
    pub max: f64,
    /// Only whole numbers.
    pub whole: bool,
}

impl Range {
    pub const fn number(default: Option<f64>, min: f64, max: f64) -> Self {
        Self { default, min, max, whole: false }
    }

    pub const fn whole(default: Option<f64>, min: f64, max: f64) -> Self {
        Self { default, min, max, whole: true }
    }

    /// This range with its upper bound set where the request type cannot know it.
    pub fn up_to(self, max: f64) -> Self {
        Self { max: self.max.min(max), ..self }
    }

    /// The value sent, checked; `None` when absent.
    pub fn given(self, field: &str, value: Option<Number>) -> Result<Option<f64>, CallError> {
        let Some(Number(v)) = value else { return Ok(None) };
        if self.whole && v.fract() != 0.0 {
            return Err(CallError::validation(field, "must be a whole number"));
        }
        match (self.min..=self.max).contains(&v) {
            true => Ok(Some(v)),
            false => {
                Err(CallError::validation(field, format!("must be between {} and {}", self.min, self.max)))
            }
        }
    }

    /// The value sent, checked, or the default.
    pub fn read(self, field: &str, value: Option<Number>) -> Result<f64, CallError> {
        let default = self.default.expect("read is for fields with a default; `given` for the others");
        Ok(self.given(field, value)?.unwrap_or(default))
    }

    fn schema(self, about: &str) -> Schema {
        let kind = if self.whole { Type::Integer } else { Type::Number };
        let object = ObjectBuilder::new()
            .schema_type(or_null(kind))
            .description(Some(about.trim()))
            .minimum(Some(self.min))
            .maximum(self.max.is_finite().then_some(self.max))
            .default(self.default.map(|d| if self.whole { (d as i64).into() } else { d.into() }));
        Schema::Object(object.build())
    }
}

/// `kind`, or null: an optional field sent as null is read as absent, as serde reads `Option`.
fn or_null(kind: Type) -> SchemaType {
    SchemaType::from_iter([kind, Type::Null])
}

/// A request field with its own [`Range`].
pub trait Bounded {
    const RANGE: Range;
    /// What the field is, for the document.
    const ABOUT: &str;
}

/// The OpenAPI schema of field `B` (for `#[schema(schema_with = bounded::<B>)]`).
pub fn bounded<B: Bounded>() -> RefOr<Schema> {
    RefOr::T(B::RANGE.schema(B::ABOUT))
}

/// A true-or-false request field, and its value when absent.
pub trait Switch {
    const DEFAULT: bool;
    /// What the field is, for the document.
    const ABOUT: &str;

    fn read(value: Option<Flag>) -> bool {
        value.map_or(Self::DEFAULT, |Flag(b)| b)
    }
}

/// The OpenAPI schema of field `S` (for `#[schema(schema_with = switch::<S>)]`).
pub fn switch<S: Switch>() -> RefOr<Schema> {
    RefOr::T(Schema::Object(
        ObjectBuilder::new()
            .schema_type(or_null(Type::Boolean))
            .description(Some(S::ABOUT.trim()))
            .default(Some(S::DEFAULT.into()))
            .build(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_checks_what_is_sent_and_fills_in_its_default() {
        let n = Range::whole(Some(128.0), 1.0, f64::INFINITY).up_to(2048.0);
        assert_eq!(n.read("max_tokens", None).unwrap(), 128.0);
        assert_eq!(n.read("max_tokens", Some(Number(9.0))).unwrap(), 9.0);
        let error = |r: Result<f64, CallError>| r.unwrap_err().to_string();
        assert_eq!(error(n.read("max_tokens", Some(Number(0.0)))), "max_tokens: must be between 1 and 2048");
        assert_eq!(error(n.read("max_tokens", Some(Number(1.5)))), "max_tokens: must be a whole number");
        let seed = Range::whole(None, 0.0, 9.0e15);
        assert_eq!(seed.given("seed", None).unwrap(), None);
        let schema =
            serde_json::to_value(Range::number(Some(1.0), 0.5, 2.5).schema(" 0 is greedy.")).unwrap();
        let expected = serde_json::json!({"type": ["number", "null"], "description": "0 is greedy.", "minimum": 0.5,
            "maximum": 2.5, "default": 1.0});
        assert_eq!(schema, expected);
        let open = serde_json::to_value(Range::whole(Some(128.0), 1.0, f64::INFINITY).schema("")).unwrap();
        assert_eq!((open["maximum"].clone(), open["default"].clone()), (serde_json::Value::Null, 128.into()));
    }
}

//! How requests are documented where the document says more than the type a handler reads:
//! creation and replacement bodies made from one body type's schema ([`documented_body!`]),
//! and the bodies and path segment of the `POST …/validate` routes.

use serde::Deserialize;
use utoipa::openapi::schema::{Schema, SchemaType, Type};
use utoipa::openapi::RefOr;

#[cfg(doc)]
use super::extract::validate_route_name;

/// The documented body of a replacement (`PUT`) of the record its path names: `T`'s schema,
/// `T` being the body that creates one, without the property `identity` (documentation only:
/// the handler reads a `T`). The path gives the identity; a body may still repeat it, as the
/// reference server's UI sends whole records back, and then it must be the path's. Left out
/// of the schema, it is never generated to name another record.
pub fn replacement_schema<T: utoipa::PartialSchema>(
    identity: &str,
    description: &str,
) -> RefOr<Schema> {
    let mut schema = T::schema();
    if let RefOr::T(Schema::Object(object)) = &mut schema {
        object.properties.retain(|name, _| name != identity);
        object.required.retain(|name| name != identity);
        object.description = Some(description.to_string());
    }
    schema
}

/// The documented body that creates a record, for a type `T` also read to replace one (where
/// the path gives the identity): `T`'s schema with the property `identity` required and not
/// `null` (documentation only: the handler reads a `T`, and refuses a creation without it).
pub fn creation_schema<T: utoipa::PartialSchema>(
    identity: &str,
    description: &str,
) -> RefOr<Schema> {
    let mut schema = T::schema();
    if let RefOr::T(Schema::Object(object)) = &mut schema {
        if !object.required.iter().any(|name| name == identity) {
            object.required.insert(0, identity.to_string());
        }
        if let Some(RefOr::T(Schema::Object(property))) = object.properties.get_mut(identity) {
            if let SchemaType::Array(types) = &property.schema_type {
                let types: Vec<Type> = types
                    .iter()
                    .filter(|t| **t != Type::Null)
                    .cloned()
                    .collect();
                property.schema_type = match types.as_slice() {
                    [one] => SchemaType::Type(one.clone()),
                    _ => SchemaType::Array(types),
                };
            }
        }
        object.description = Some(description.to_string());
    }
    schema
}

/// Declares a request body documented from another body type's schema (documentation only:
/// the handler reads that type): `Name = creation_schema::<Spec>("identity", "description")`
/// or `Name = replacement_schema::<Spec>(…)`. The schema is listed under `Name`, and `Spec`'s
/// own schemas with it.
macro_rules! documented_body {
    (
        $(#[$meta:meta])*
        $name:ident = $make:ident::<$spec:ty>($identity:literal, $description:literal $(,)?)
    ) => {
        $(#[$meta])*
        struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::http::request_docs::$make::<$spec>($identity, $description)
            }
        }

        impl utoipa::ToSchema for $name {
            fn schemas(
                schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>,
            ) {
                <$spec as utoipa::ToSchema>::schemas(schemas);
            }
        }
    };
}
pub(crate) use documented_body;

/// `{"name": …}` for `…/validate` (documentation only: the body is read by
/// [`validate_route_name`]): a name by the URL-friendly rule.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct NameToValidate {
    #[schema(
        min_length = 2,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "new-feature"
    )]
    name: String,
}

/// `{"id": …}` for `POST /api/admin/projects/validate` (documentation only).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct IdToValidate {
    #[schema(
        min_length = 2,
        max_length = 100,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "checkout"
    )]
    id: String,
}

/// The last segment of `POST …/validate` on a route whose parameter is `{name}` (the route
/// is shared so that a record called `validate` stays addressable).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ValidateNameSegment {
    /// `validate`
    #[param(example = "validate", pattern = "^validate$")]
    pub name: String,
}

/// The last segment of `POST …/validate` on a route whose parameter is `{id}`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ValidateIdSegment {
    /// `validate`
    #[param(example = "validate", pattern = "^validate$")]
    pub id: String,
}

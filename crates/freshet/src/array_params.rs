//! Statements with parameters of array type (`WHERE id = ANY($1)` with an `int4[]` bound,
//! `unnest($1::int[])`), prepared and run in a form per array length
//! (`freshet_core::sql::array_params`).
//!
//! Prepared, such a statement is planned once in its typing form, which gives the types of
//! its parameters (an array's element type from where it is compared) and its result
//! columns; each run takes the form for its arrays' lengths, planned the first time that
//! length comes and kept with the statement ([`MAX_FORMS`] at most), and runs it with the
//! statement's own parameters (an array's own slot NULL) followed by the elements.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use freshet_core::sql::array_params::{self, ArrayParam};
use freshet_core::sql::plpgsql::parse_array_text;
use freshet_core::types::{DataType, Value};
use freshet_core::{Error, Result, SqlState};
use sqlparser::ast::Statement;

use crate::result::StatementResult;
use crate::session::{Prepared, Session};

/// The most forms a statement keeps: past that, they are all planned again as they come.
const MAX_FORMS: usize = 64;

/// A prepared statement's array parameters and its forms.
pub(crate) struct ArrayForms {
    statement: Statement,
    params: Vec<ArrayParam>,
    /// Per array parameter, its element type.
    elems: Vec<DataType>,
    /// The statement's own parameters' types (an array's: its element type).
    own: Vec<DataType>,
    forms: Mutex<HashMap<Vec<Option<usize>>, Arc<Form>>>,
}

/// A statement's form for some lengths, planned.
struct Form {
    prepared: Arc<Prepared>,
    blocks: Vec<(usize, usize)>,
}

impl ArrayForms {
    pub(crate) fn is_array(&self, i: usize) -> bool {
        self.params.iter().any(|p| p.index == i)
    }
}

/// Whether a statement of this kind takes array parameters: a query, INSERT, UPDATE, DELETE
/// or CALL (not, for one, PREPARE, whose statement's parameters are its own).
pub(crate) fn applies(statement: &Statement) -> bool {
    matches!(statement, Statement::Query(_) | Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Call(_))
}

impl Session {
    /// Prepares `statement`, whose parameters `found` are arrays, of `own` parameters in all:
    /// plans its typing form.
    pub(crate) async fn prepare_array_forms(&mut self, statement: Statement, sql: &str, declared: &[Option<DataType>], found: Vec<ArrayParam>, own: usize) -> Result<Arc<Prepared>> {
        let known: Vec<Option<DataType>> = found.iter().map(|p| p.elem).collect();
        let typing = array_params::form(&statement, &found, &known, own, &[], true)?;
        let mut typing_declared: Vec<Option<DataType>> = (0..own).map(|i| declared.get(i).copied().flatten()).collect();
        for &(a, count) in &typing.blocks {
            typing_declared.extend(std::iter::repeat_n(known[a], count));
        }
        let text = typing.statement.to_string();
        let typed = Box::pin(self.prepare_statement(typing.statement, &text, &typing_declared)).await?;
        let mut elems: Vec<Option<DataType>> = known;
        let mut at = own;
        for &(a, count) in &typing.blocks {
            elems[a] = elems[a].or(typed.param_types.get(at).copied());
            at += count;
        }
        let elems: Vec<DataType> = elems.into_iter().map(|e| e.unwrap_or(DataType::Text)).collect();
        let mut own_types: Vec<DataType> = typed.param_types.iter().take(own).copied().collect();
        own_types.resize(own, DataType::Text);
        for (p, elem) in found.iter().zip(&elems) {
            own_types[p.index] = *elem;
        }
        let forms = ArrayForms { statement: statement.clone(), params: found, elems, own: own_types.clone(), forms: Mutex::new(HashMap::new()) };
        Ok(Arc::new(Prepared::with_array_forms(sql, statement, own_types, typed.columns.clone(), forms)))
    }

    /// Runs a statement with array parameters in the form for their lengths.
    pub(crate) async fn execute_array_forms(&mut self, forms: &Arc<ArrayForms>, mut params: Vec<Value>) -> Result<StatementResult> {
        let mut arrays = Vec::with_capacity(forms.params.len());
        for (p, &elem) in forms.params.iter().zip(&forms.elems) {
            arrays.push(match std::mem::replace(&mut params[p.index], Value::Null) {
                Value::Null => None,
                Value::Text(text) => Some(parse_array_text(&text, elem)?),
                other => {
                    return Err(Error::new(
                        SqlState::DatatypeMismatch,
                        format!("parameter ${} is an array of {}: its value is the array's text form, such as '{{1,2}}', not {other:?}", p.index + 1, elem.pg_name()),
                    ));
                }
            });
        }
        let lengths: Vec<Option<usize>> = forms.params.iter().zip(&arrays).map(|(p, a)| p.form_length(a.as_ref().map(Vec::len))).collect();
        let cached = forms.forms.lock().expect("forms lock").get(&lengths).cloned();
        let form = match cached {
            Some(form) => form,
            None => {
                let known: Vec<Option<DataType>> = forms.elems.iter().copied().map(Some).collect();
                let form = array_params::form(&forms.statement, &forms.params, &known, forms.own.len(), &lengths, false)?;
                let mut declared: Vec<Option<DataType>> = forms.own.iter().copied().map(Some).collect();
                for &(a, count) in &form.blocks {
                    declared.extend(std::iter::repeat_n(Some(forms.elems[a]), count));
                }
                let text = form.statement.to_string();
                let prepared = Box::pin(self.prepare_statement(form.statement, &text, &declared)).await?;
                let form = Arc::new(Form { prepared, blocks: form.blocks });
                let mut cache = forms.forms.lock().expect("forms lock");
                if cache.len() >= MAX_FORMS {
                    cache.clear();
                }
                cache.insert(lengths, form.clone());
                form
            }
        };
        for &(a, count) in &form.blocks {
            let items = arrays[a].as_deref().unwrap_or_default();
            let last = items.last().cloned().unwrap_or(Value::Null);
            params.extend(items.iter().cloned().chain(std::iter::repeat(last)).take(count));
        }
        Box::pin(self.execute(&form.prepared, params)).await
    }
}

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use chrono::Utc;
use flagpole::domain::state::ConfigState;
use flagpole::domain::tag::TagRef;
use flagpole::domain::toggle::{Constraint, Operator, Strategy, Toggle, Variant, WeightType};
use flagpole::snapshot::client_document::{PieceList, ClientResponse};
include!("/tmp/state_with.rs");
fn main() {
    let mut state = state_with(10_000);
    state.version = 1;
    let p0 = PieceList::update(&PieceList::default(), &state);
    let d0 = ClientResponse::assemble(p0.pieces(), 1, None);
    let mut next = state.clone();
    let (name, t) = state.features.iter().nth(5000).unwrap();
    let mut c = (**t).clone(); c.enabled = !c.enabled;
    next.features.insert(name.clone(), Arc::new(c));
    next.version = 2;
    for _ in 0..5 {
        let t0 = Instant::now();
        let p1 = PieceList::update(&p0, &next);
        let t1 = Instant::now();
        let d1 = ClientResponse::assemble(p1.pieces(), 2, Some(&d0));
        let t2 = Instant::now();
        drop(d1); drop(p1);
        let t3 = Instant::now();
        println!("pieces {:?} assemble {:?} drop {:?}", t1-t0, t2-t1, t3-t2);
    }
}

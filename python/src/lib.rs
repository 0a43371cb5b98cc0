//! `quench._quench`: the simulator's library entry point (`quench_sim::run`, `quench_sim::sweep`)
//! for the `quench` Python package. The package (quench/__init__.py) turns a run's output files
//! into DataFrames; this module runs, checks and names runs. Errors are `ValueError`s carrying the
//! message `quench sim` prints (the whole cause chain).
use std::path::{Path, PathBuf};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};
use quench_config::bundled::{Kind, BUNDLED};
use quench_sim::run::{prepare, run as run_sim, Spec};
use quench_sim::sweep::{self, Point, Row};
use quench_sim::CcKind;

fn value_error(e: anyhow::Error) -> PyErr {
    PyValueError::new_err(format!("{e:#}"))
}

/// A Python value as a scenario value: booleans, integers and floats as themselves, a string as
/// `quench sim --sweep` reads one (TOML if it parses as TOML, else the string).
fn toml_value(v: &Bound<'_, PyAny>) -> PyResult<toml::Value> {
    if v.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(toml::Value::Integer(v.extract()?));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(v.extract()?));
    }
    if v.is_instance_of::<PyString>() {
        let s: String = v.extract()?;
        return Ok(sweep::value(s.trim()));
    }
    Err(PyValueError::new_err(format!(
        "{}: a scenario value is a bool, an int, a float or a string",
        v.repr()?
    )))
}

/// The run `quench.sim`'s arguments describe, from the dict the package passes (keys of
/// [`Spec`]; `stop` a duration with its unit, `cc` a name).
fn spec_of(d: &Bound<'_, PyDict>) -> PyResult<Spec> {
    fn get<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, k: &str) -> PyResult<Option<T>> {
        match d.get_item(k)? {
            Some(v) if !v.is_none() => v.extract().map(Some),
            _ => Ok(None),
        }
    }
    let stop = get::<String>(d, "stop")?
        .map(|s| {
            units::Duration::parse(&s).map_err(|e| PyValueError::new_err(format!("stop: {e}")))
        })
        .transpose()?;
    let cc = get::<String>(d, "cc")?
        .map(|c| CcKind::parse(&c))
        .transpose()
        .map_err(value_error)?;
    Ok(Spec {
        topology: get::<PathBuf>(d, "topology")?,
        flows: get::<PathBuf>(d, "flows")?,
        cc,
        preset: get(d, "preset")?,
        config: get(d, "config")?,
        scenario: get(d, "scenario")?,
        seed: get(d, "seed")?,
        stop,
        ns3_config: get::<PathBuf>(d, "ns3_config")?,
        ns3_dir: get::<PathBuf>(d, "ns3_dir")?,
        bw: get(d, "bw")?,
    })
}

/// A grid point from `[(key, value), ...]` and a seed.
fn point_of(overrides: &[(String, Bound<'_, PyAny>)], seed: Option<u64>) -> PyResult<Point> {
    let overrides = overrides
        .iter()
        .map(|(k, v)| Ok((k.clone(), toml_value(v)?)))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Point { overrides, seed })
}

/// Runs `spec` at one point into `out`, without the GIL. Returns the run's name and its row of
/// `quench sim --sweep`'s table (sweep::COLUMNS), as JSON.
#[pyfunction]
#[pyo3(signature = (spec, overrides, seed, out))]
fn run(
    py: Python<'_>,
    spec: &Bound<'_, PyDict>,
    overrides: Vec<(String, Bound<'_, PyAny>)>,
    seed: Option<u64>,
    out: PathBuf,
) -> PyResult<String> {
    let spec = spec_of(spec)?;
    let point = point_of(&overrides, seed)?;
    let row = py
        .allow_threads(|| -> anyhow::Result<Row> {
            let t0 = std::time::Instant::now();
            let prepared = prepare(&spec, &point.overrides, point.seed)?;
            std::fs::create_dir_all(&out)
                .map_err(|e| anyhow::anyhow!("creating {}: {e}", out.display()))?;
            let outcome = run_sim(prepared, Path::new(&out), &mut |_| {}, &|| true)?;
            Ok(Row {
                name: point.name(),
                point: point.clone(),
                summary: outcome.summary,
                wall: units::Duration::from_nanos(t0.elapsed().as_nanos() as u64),
            })
        })
        .map_err(value_error)?;
    Ok(serde_json::Value::Array(sweep::row_values(&row).to_vec()).to_string())
}

/// Checks every point's inputs before a sweep starts (sweep::check); returns the points' names.
#[pyfunction]
fn check(
    py: Python<'_>,
    spec: &Bound<'_, PyDict>,
    points: Vec<(Vec<(String, Bound<'_, PyAny>)>, Option<u64>)>,
) -> PyResult<Vec<String>> {
    let spec = spec_of(spec)?;
    let points = points
        .iter()
        .map(|(o, s)| point_of(o, *s))
        .collect::<PyResult<Vec<_>>>()?;
    py.allow_threads(|| sweep::check(&spec, &points))
        .map_err(value_error)?;
    Ok(points.iter().map(Point::name).collect())
}

/// The columns of a sweep's rows, as `sweep.tsv` has them.
#[pyfunction]
fn columns() -> Vec<&'static str> {
    sweep::COLUMNS.to_vec()
}

/// The names of the bundled files of one kind: `preset` (default), `scenario`, `cdf`, `send`,
/// `switch`, `appliance`.
#[pyfunction]
#[pyo3(signature = (kind = "preset"))]
fn presets(kind: &str) -> PyResult<Vec<&'static str>> {
    let kind = match kind {
        "preset" => Kind::Preset,
        "scenario" => Kind::Scenario,
        "cdf" => Kind::Cdf,
        "send" => Kind::Send,
        "switch" => Kind::Switch,
        "appliance" => Kind::Appliance,
        k => {
            return Err(PyValueError::new_err(format!(
                "presets(`{k}`): a kind is preset, scenario, cdf, send, switch or appliance"
            )))
        }
    };
    Ok(BUNDLED
        .iter()
        .filter(|b| b.kind == kind)
        .map(|b| b.name)
        .collect())
}

#[pymodule]
fn _quench(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(columns, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    Ok(())
}

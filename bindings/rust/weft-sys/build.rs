// Links libweft from $WEFT_LIB_DIR (default: the repository's build/ folder) and measures the C layout of
// weft.h's structs with the system C compiler, so a test can catch a Rust declaration that drifted from the
// header (crates.io is out of reach, hence no `cc`/`bindgen`: the compiler is run by hand).
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

// Every (struct) and (struct, field) the layout test compares; keep in step with src/lib.rs's test.
const SIZES: &[&str] = &[
    "weft_dim",
    "weft_context_options",
    "weft_rope_options",
    "weft_attention_options",
    "weft_tensor_info",
    "weft_tensor_view",
    "weft_binding",
    "weft_compile_options",
    "weft_compile_report",
    "weft_program_options",
    "weft_program_stats",
    "weft_model_options",
    "weft_model_info",
    "weft_generate_request",
    "weft_generate_report",
    "weft_tensor",
    "weft_status",
];
const OFFSETS: &[(&str, &str)] = &[
    ("weft_rope_options", "style"),
    ("weft_rope_options", "factor"),
    ("weft_rope_options", "original_max_position"),
    ("weft_attention_options", "scale"),
    ("weft_tensor_info", "dims"),
    ("weft_tensor_info", "is_output"),
    ("weft_tensor_view", "shape"),
    ("weft_binding", "value"),
    ("weft_compile_options", "disable_cache"),
    ("weft_compile_report", "cache_hit"),
    ("weft_compile_report", "key"),
    ("weft_program_options", "arch"),
    ("weft_program_options", "disable_cache"),
    ("weft_program_options", "max_loaded_kernels"),
    ("weft_program_options", "lazy"),
    ("weft_program_stats", "compiles"),
    ("weft_program_stats", "cache_loads"),
    ("weft_program_stats", "evictions"),
    ("weft_program_stats", "generic_runs"),
    ("weft_program_stats", "pending"),
    ("weft_program_stats", "loaded"),
    ("weft_program_stats", "host_jit"),
    ("weft_program_stats", "host_jit_cache_hit"),
    ("weft_program_stats", "host_jit_ms"),
    ("weft_model_options", "disable_cache"),
    ("weft_model_info", "device"),
    ("weft_model_info", "weight_bytes"),
    ("weft_generate_request", "prompt_ids"),
    ("weft_generate_request", "multi_step"),
    ("weft_generate_request", "out_step_ms"),
    ("weft_generate_request", "on_step"),
    ("weft_generate_request", "on_step_user"),
    ("weft_generate_report", "steps_done"),
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let repo = manifest.join("../../..");
    println!("cargo:rerun-if-env-changed=WEFT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=WEFT_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-changed=build.rs");

    let lib_dir = env::var_os("WEFT_LIB_DIR").map(PathBuf::from).unwrap_or_else(|| repo.join("build"));
    if !lib_dir.join("libweft.so").exists() {
        println!("cargo:warning=no libweft.so in {} (set WEFT_LIB_DIR)", lib_dir.display());
    }
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib=weft");
    // Exposed to dependents as DEP_WEFT_LIB_DIR (this crate `links = "weft"`).
    println!("cargo:lib_dir={}", lib_dir.display());

    let include = env::var_os("WEFT_INCLUDE_DIR").map(PathBuf::from).unwrap_or_else(|| repo.join("include"));
    println!("cargo:rerun-if-changed={}", include.join("weft/weft.h").display());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let (entries, note) = match measure(&include, &out) {
        Ok(e) => (e, String::new()),
        Err(why) => {
            println!("cargo:warning=struct layout check disabled: {why}");
            (String::new(), why)
        }
    };
    let rs = format!(
        "const C_LAYOUT: &[(&str, usize)] = &[{entries}];\n#[allow(dead_code)]\nconst C_LAYOUT_NOTE: &str = {note:?};\n"
    );
    fs::write(out.join("c_layout.rs"), rs).unwrap();
}

// Compiles and runs a C program printing each size/offset; returns them as Rust tuple literals.
fn measure(include: &Path, out: &Path) -> Result<String, String> {
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n#include \"weft/weft.h\"\nint main(void) {\n");
    for s in SIZES {
        c += &format!("  printf(\"(\\\"sizeof {s}\\\", %zu),\\n\", sizeof({s}));\n");
    }
    for (s, f) in OFFSETS {
        c += &format!("  printf(\"(\\\"offsetof {s}.{f}\\\", %zu),\\n\", offsetof({s}, {f}));\n");
    }
    c += "  return 0;\n}\n";
    let src = out.join("layout_probe.c");
    let exe = out.join("layout_probe");
    fs::write(&src, c).map_err(|e| e.to_string())?;
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .arg("-I")
        .arg(include)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .map_err(|e| format!("cannot run {cc}: {e}"))?;
    if !status.success() {
        return Err(format!("{cc} failed on weft.h from {}", include.display()));
    }
    let run = Command::new(&exe).output().map_err(|e| e.to_string())?;
    String::from_utf8(run.stdout).map_err(|e| e.to_string())
}

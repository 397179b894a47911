/* The compiler from C (libhexir_compile): a .hxir or .onnx source to an .hxe,
 * with hexir-compile's options. A library of its own, beside libhexir_vm,
 * which never holds the compiler (nor protobuf); an application that only
 * runs models does not link this one.
 *
 *   const char* options[] = {"--input-shape=input=1x3x224x224", "--no-fuse"};
 *   char message[1024];
 *   int code = hexir_compile("model.onnx", "model.hxe", options, 2, message, sizeof message);
 *   if (code) fprintf(stderr, "%s\n", message);
 *
 * Options are hexir-compile's command-line options (docs/tools.md), one per
 * element as `--name=value` or `--name` (a flag), or `--name` and its value
 * as two elements; they are parsed by the tool's own code, so every option
 * of the tool is accepted and an option added to it needs no new function
 * here. Nothing is thrown across this API and nothing global is kept: calls
 * on several threads at once are independent. */
#ifndef HEXIR_COMPILE_H_
#define HEXIR_COMPILE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Changes only when a function's signature changes. */
#define HEXIR_COMPILE_ABI_VERSION 1
uint32_t hexir_compile_abi_version(void);

/* Compiles `source` (.hxir text, or an .onnx model by its extension) into
 * `output` (written to OUTPUT.tmp and renamed: a failed compile leaves no
 * half file). Returns 0 on success, otherwise a status code of
 * hexir/hexir.h's hexir_status_code_t (HEXIR_STATUS_INVALID_ARGUMENT for a
 * wrong option, the compiler's own code for a failed compile), with the
 * message (NUL-terminated, truncated to fit) in `message` when it is not
 * NULL; on success `message` holds an empty string. `options` may be NULL
 * when `option_count` is 0. */
int hexir_compile(const char* source, const char* output, const char* const* options, size_t option_count,
                  char* message, size_t message_size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HEXIR_COMPILE_H_ */

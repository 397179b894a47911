/* The C API used from C99 (compiled by meson as C with -std=c99
 * -pedantic-errors): loads `model_path` (the mlp sample, f32[8,128] ->
 * f32[8,10]), runs it with a caller's input and output buffer, and compares
 * the result with `expected` (80 floats). Called by c_api_test.cc; returns 0
 * when every check held, otherwise the number of the first that failed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hexir/hexir.h"

int hexir_c99_check(const char* model_path, const float* input, const float* expected);

static int report(int check, hexir_status_t* status) {
  if (status) {
    fprintf(stderr, "c99 check %d: %s: %s\n", check, hexir_status_code_name(hexir_status_code(status)),
            hexir_status_message(status));
    hexir_status_free(status);
  } else {
    fprintf(stderr, "c99 check %d failed\n", check);
  }
  return check;
}

int hexir_c99_check(const char* model_path, const float* input, const float* expected) {
  hexir_device_options_t device_options;
  hexir_load_options_t load_options;
  hexir_device_t* device = NULL;
  hexir_module_t* module = NULL;
  hexir_program_t* program = NULL;
  hexir_context_t* context = NULL;
  hexir_tensor_info_t info;
  hexir_tensor_t in, out;
  static float result[80];
  size_t main_fn = 99, i;
  hexir_status_t* status;
  int failed = 0;

  if (hexir_abi_version() != HEXIR_ABI_VERSION) return report(1, NULL);

  /* An error: a code and a message naming the path; freed by the caller. */
  status = hexir_module_load_file("/nonexistent/model.hxe", NULL, &module);
  if (hexir_status_code(status) != HEXIR_STATUS_NOT_FOUND || module != NULL ||
      strstr(hexir_status_message(status), "/nonexistent/model.hxe") == NULL)
    return report(2, status);
  hexir_status_free(status);

  hexir_device_options_init(&device_options);
  device_options.threads = 1;
  status = hexir_device_create("cpu", &device_options, &device);
  if (status) return report(3, status);
  hexir_load_options_init(&load_options);
  status = hexir_module_load_file(model_path, &load_options, &module);
  if (status) return report(4, status);
  status = hexir_module_find_function(module, "main", &main_fn);
  if (status) return report(5, status);
  status = hexir_module_input_info(module, main_fn, 0, &info);
  if (status) return report(6, status);
  if (info.dtype != HEXIR_DTYPE_F32 || info.rank != 2 || info.dims[0] != 8 || info.dims[1] != 128 ||
      info.byte_size != 8 * 128 * 4)
    return report(7, NULL);
  status = hexir_program_prepare(module, device, &program);
  if (status) return report(8, status);
  /* The program keeps module and device alive: the caller's handles may go. */
  hexir_module_release(module);
  hexir_device_release(device);
  status = hexir_context_create(program, &context);
  if (status) return report(9, status);

  /* The bounds on an invoke: none by default; a cancel with no invoke running does nothing. */
  status = hexir_context_set_max_loop_iterations(context, 1000);
  if (status) return report(13, status);
  status = hexir_context_set_deadline(context, (uint64_t)60 * 1000000000u);
  if (status) return report(14, status);
  if (hexir_context_cancel(context) != 0) return report(15, NULL);

  in.data = (void*)input;
  in.byte_size = 8 * 128 * sizeof(float);
  in.dtype = HEXIR_DTYPE_F32;
  in.rank = 0;
  in.dims = NULL; /* the declared shape */
  out.data = result;
  out.byte_size = sizeof result;
  out.dtype = HEXIR_DTYPE_F32;
  out.rank = 0;
  out.dims = NULL;
  status = hexir_context_invoke(context, main_fn, &in, 1, &out, 1);
  if (status) return report(10, status);
  for (i = 0; i < 80; ++i)
    if (!(fabsf(result[i] - expected[i]) <= 1e-5f + 1e-4f * fabsf(expected[i]))) failed = 1;
  if (failed) return report(11, NULL);

  /* A wrong dtype: refused with a message naming the input. */
  in.dtype = HEXIR_DTYPE_I32;
  status = hexir_context_invoke(context, main_fn, &in, 1, NULL, 0);
  if (hexir_status_code(status) != HEXIR_STATUS_INVALID_ARGUMENT || strstr(hexir_status_message(status), "x") == NULL)
    return report(12, status);
  hexir_status_free(status);

  hexir_program_release(program);
  hexir_context_release(context);
  return 0;
}

/* A minimal C application embedding libhexir_vm through the C API
 * (hexir/hexir.h): loads a compiled model, runs its first function once on
 * the CPU with one f32 .npy input and prints the first output; given a
 * reference .npy, checks the output against it (exit 1 when it differs).
 *
 *   hexir-compile samples/mlp.hxir -o mlp.hxe
 *   cc main.c $(pkg-config --cflags --libs hexir) -lm -o hexir-embed-c
 *   ./hexir-embed-c mlp.hxe samples/mlp/input_x.npy [samples/mlp/expected_0.npy]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexir/hexir.h"

/* Reads a little-endian f32 .npy (C order) into a malloc'd buffer: the
 * sample's only file format. Returns the element count, 0 on failure. */
static size_t read_f32_npy(const char* path, float** out) {
  unsigned char head[10];
  char header[4096];
  unsigned header_len;
  size_t count = 1, got;
  long data_start, file_size;
  const char* shape;
  FILE* f = fopen(path, "rb");
  *out = NULL;
  if (!f) return 0;
  if (fread(head, 1, 10, f) != 10 || memcmp(head, "\x93NUMPY", 6) != 0 || head[6] != 1) goto fail;
  header_len = head[8] | (head[9] << 8);
  if (header_len >= sizeof header || fread(header, 1, header_len, f) != header_len) goto fail;
  header[header_len] = 0;
  if (!strstr(header, "'<f4'") || strstr(header, "'fortran_order': True")) goto fail;
  shape = strstr(header, "'shape': (");
  if (!shape) goto fail;
  for (shape += 10; *shape && *shape != ')';) {
    char* end;
    unsigned long d = strtoul(shape, &end, 10);
    if (end == shape) break;
    count *= d;
    shape = end;
    while (*shape == ',' || *shape == ' ') ++shape;
  }
  data_start = ftell(f);
  if (fseek(f, 0, SEEK_END) != 0) goto fail;
  file_size = ftell(f);
  if (file_size - data_start != (long)(count * sizeof(float)) || fseek(f, data_start, SEEK_SET) != 0) goto fail;
  *out = malloc(count * sizeof(float) + 1);
  if (!*out) goto fail;
  got = fread(*out, sizeof(float), count, f);
  fclose(f);
  if (got != count) {
    free(*out);
    *out = NULL;
    return 0;
  }
  return count;
fail:
  fclose(f);
  return 0;
}

/* Prints a failed call's status, frees it, and gives the exit code. */
static int fail(const char* what, hexir_status_t* status) {
  fprintf(stderr, "hexir-embed-c: %s: %s: %s\n", what, hexir_status_code_name(hexir_status_code(status)),
          hexir_status_message(status));
  hexir_status_free(status);
  return 1;
}

int main(int argc, char** argv) {
  hexir_device_t* device = NULL;
  hexir_module_t* module = NULL;
  hexir_program_t* program = NULL;
  hexir_context_t* context = NULL;
  hexir_tensor_info_t in_info, out_info;
  hexir_tensor_t input, output;
  hexir_status_t* status;
  const char* fn_name;
  float *x = NULL, *y = NULL, *want = NULL;
  size_t n_x, n_want = 0, i, n_y;
  double worst = 0;
  int rc = 0;

  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s MODEL.hxe INPUT.npy [EXPECTED.npy]\n", argv[0]);
    return 2;
  }
  if (hexir_abi_version() != HEXIR_ABI_VERSION) {
    fprintf(stderr, "hexir-embed-c: built against ABI %d, the library is %u\n", HEXIR_ABI_VERSION,
            (unsigned)hexir_abi_version());
    return 1;
  }
  /* 1. Load: mmap the file and verify it. Nothing is copied. */
  status = hexir_module_load_file(argv[1], NULL, &module);
  if (status) return fail("load", status);
  /* Reflection: the sizes of the caller's buffers, before preparing anything. */
  status = hexir_module_input_info(module, 0, 0, &in_info);
  if (!status) status = hexir_module_output_info(module, 0, 0, &out_info);
  if (status) return fail("signature", status);
  /* Borrowed: valid while the module lives (the context below keeps it). */
  fn_name = hexir_module_function_name(module, 0);
  n_x = read_f32_npy(argv[2], &x);
  if (n_x == 0 || in_info.dtype != HEXIR_DTYPE_F32 || n_x * sizeof(float) != in_info.byte_size) {
    fprintf(stderr, "hexir-embed-c: %s is not an f32 .npy of %llu bytes (input '%s')\n", argv[2],
            (unsigned long long)in_info.byte_size, in_info.name);
    return 1;
  }
  /* 2. Prepare once per device; the program keeps module and device alive. */
  status = hexir_device_create("cpu", NULL, &device);
  if (status) return fail("device", status);
  status = hexir_program_prepare(module, device, &program);
  hexir_module_release(module);
  hexir_device_release(device);
  if (status) return fail("prepare", status);
  /* 3. One context per thread: its arena is allocated here, not per invoke. */
  status = hexir_context_create(program, &context);
  hexir_program_release(program);
  if (status) return fail("context", status);

  /* 4. Invoke with our own output buffer (dims NULL: the declared shapes). */
  n_y = (size_t)(out_info.byte_size / sizeof(float));
  y = malloc(out_info.byte_size + 1);
  if (!y) return 1;
  input.data = x;
  input.byte_size = in_info.byte_size;
  input.dtype = in_info.dtype;
  input.rank = 0;
  input.dims = NULL;
  output.data = y;
  output.byte_size = out_info.byte_size;
  output.dtype = out_info.dtype;
  output.rank = 0;
  output.dims = NULL;
  status = hexir_context_invoke(context, 0, &input, 1, &output, 1);
  if (status) return fail("invoke", status);

  printf("%s: output '%s' %s[", fn_name, out_info.name,
         hexir_dtype_name(out_info.dtype));
  for (i = 0; i < out_info.rank; ++i) printf(i ? ",%lld" : "%lld", (long long)out_info.dims[i]);
  printf("]:");
  for (i = 0; i < n_y && i < 10; ++i) printf(" %.6f", y[i]);
  printf(n_y > 10 ? " ... (%zu values)\n" : "\n", n_y);

  if (argc == 4) {
    n_want = read_f32_npy(argv[3], &want);
    if (n_want != n_y) {
      fprintf(stderr, "hexir-embed-c: %s does not hold %zu f32 values\n", argv[3], n_y);
      rc = 1;
    } else {
      for (i = 0; i < n_y; ++i) {
        double excess = fabs((double)y[i] - want[i]) - (1e-5 + 1e-4 * fabs((double)want[i]));
        if (!(excess <= 0)) rc = 1;
        if (fabs((double)y[i] - want[i]) > worst) worst = fabs((double)y[i] - want[i]);
      }
      printf(rc ? "differs from %s (max abs diff %g)\n" : "matches %s (max abs diff %g)\n", argv[3], worst);
    }
  }
  hexir_context_release(context);
  free(x);
  free(y);
  free(want);
  return rc;
}

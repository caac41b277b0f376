#include <stdio.h>
#include "weft/weft.h"
int main(void) {
  if (weft_version() != WEFT_VERSION) {
    fprintf(stderr, "header %d != library %d\n", WEFT_VERSION, weft_version());
    return 1;
  }
  weft_context* ctx = NULL;
  if (weft_context_create(NULL, &ctx) != WEFT_OK) return 1;
  weft_context_destroy(ctx);
  printf("consumer_c: weft %s\n", weft_version_string());
  return 0;
}

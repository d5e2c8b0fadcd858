/* The public header must compile alone as C11 (-Wpedantic -Werror). */
#include "flashsampling.h"
int fs_header_alone_c(void);
int fs_header_alone_c(void) { return FS_VERSION_NUMBER + (int)sizeof(fs_problem); }

/* reference_filter.c: placeholder */
#include "fs_int.h"

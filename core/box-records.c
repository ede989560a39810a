/* box-records.c: to be written */
#include "config.h"

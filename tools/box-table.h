/* box-table.h: the aligned text tables box and boxctl print. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _BoxTable BoxTable;

/* @header: the column titles (already translated); copied. */
BoxTable *box_table_new     (const char *const *header);
/* One string per column, then NULL; NULL cells are not allowed, "" is. */
void      box_table_add     (BoxTable *table, ...) G_GNUC_NULL_TERMINATED;
/* Takes @row, a GStrv of exactly as many strings as there are columns. */
void      box_table_add_row (BoxTable *table, char **row);
/* Columns two spaces apart, each as wide as its widest cell. */
void      box_table_print   (BoxTable *table);
void      box_table_free    (BoxTable *table);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxTable, box_table_free)

G_END_DECLS

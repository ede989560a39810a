/* box-table.c: the aligned text tables box and boxctl print. */
#include "config.h"

#include <stdarg.h>

#include "box-table.h"

struct _BoxTable {
  GPtrArray *rows;   /* GStrv, the header first */
  guint      n_columns;
};

BoxTable *
box_table_new (const char *const *header)
{
  BoxTable *table = g_new0 (BoxTable, 1);

  table->rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  table->n_columns = g_strv_length ((char **) header);
  g_ptr_array_add (table->rows, g_strdupv ((char **) header));
  return table;
}

void
box_table_add (BoxTable *table, ...)
{
  char **row = g_new0 (char *, table->n_columns + 1);
  va_list args;

  va_start (args, table);
  for (guint i = 0; i < table->n_columns; i++) {
    const char *cell = va_arg (args, const char *);

    g_assert (cell != NULL);
    row[i] = g_strdup (cell);
  }
  g_assert (va_arg (args, const char *) == NULL);
  va_end (args);
  g_ptr_array_add (table->rows, row);
}

void
box_table_add_row (BoxTable *table, char **row)
{
  g_assert (g_strv_length (row) == table->n_columns);
  g_ptr_array_add (table->rows, row);
}

void
box_table_print (BoxTable *table)
{
  g_autofree glong *widths = g_new0 (glong, table->n_columns);

  for (guint r = 0; r < table->rows->len; r++) {
    char **row = g_ptr_array_index (table->rows, r);

    for (guint c = 0; c < table->n_columns; c++)
      widths[c] = MAX (widths[c], g_utf8_strlen (row[c], -1));
  }
  for (guint r = 0; r < table->rows->len; r++) {
    char **row = g_ptr_array_index (table->rows, r);
    g_autoptr(GString) line = g_string_new (NULL);

    for (guint c = 0; c < table->n_columns; c++) {
      g_string_append (line, row[c]);
      if (c + 1 < table->n_columns) {
        for (glong pad = g_utf8_strlen (row[c], -1); pad < widths[c] + 2; pad++)
          g_string_append_c (line, ' ');
      }
    }
    g_print ("%s\n", line->str);
  }
}

void
box_table_free (BoxTable *table)
{
  g_ptr_array_unref (table->rows);
  g_free (table);
}

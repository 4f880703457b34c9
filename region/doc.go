// Package region implements region templates: the data abstraction through
// which the stages of a tile-processing pipeline read and write their data
// (after Teodoro et al., "Region Templates").
//
// A [Template] is a container for one spatial domain (a slide, a volume)
// with a bounding box; it holds data regions. A data region ([Region]) is
// identified by an [ID] — (name, kind, timestamp, version), the name
// optionally qualified as "namespace::key" — and has an element type, a
// bounding box (the extent of its array in template coordinates) and a
// region of interest (ROI): the part of the array a stage instance works on
// and that is held in memory. [Dense] implements dense 2-D and 3-D arrays;
// the identifier format reserves kinds for sparse arrays and polygon sets.
//
// Regions are bound to a [Storage] they are read from and one they are
// committed to: [Memory] keeps them in process memory, [Disk] in files that
// are read and written box by box, so that reading a ROI touches only the
// ROI. A region is read eagerly ([Template.Instantiate], [Dense.Stage]) or
// lazily, on first access ([Dense.Data]).
//
// Stages declare the regions they read and write; the pats package uses
// those declarations to stage (read) inputs ahead of the computation and to
// commit outputs when a stage instance completes.
//
// Malformed identifiers, missing regions and boxes outside a region's bounds
// are reported as errors wrapping [ErrBadID], [ErrNotFound] and
// [ErrOutOfBounds], with the identifier or box in the message.
package region

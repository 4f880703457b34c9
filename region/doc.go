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
// and that is held in memory. [Dense] implements dense 1-D, 2-D and 3-D
// arrays, [Sparse] sparse 2-D and 3-D coordinate lists, and [PolygonSet]
// sets of polygons (nuclei outlines) with box queries. [Grid] and
// [Irregular] partition a domain among stage instances with ghost borders;
// [ChunkMap] maps the chunks of a split region to their keys.
//
// Regions are bound to a [Storage] they are read from and one they are
// committed to: [Memory] keeps them in process memory, [Disk] in files that
// are read and written box by box, so that reading a ROI touches only the
// ROI. Sparse regions and polygon sets go through [ObjectStorage], which
// both implement, in a checked binary format ([ErrCorrupt]). A region is read eagerly ([Template.Instantiate], [Dense.Stage]) or
// lazily, on first access ([Dense.Data]).
//
// The data of a [Dense] region can live on devices (GPUs) while operations
// there reuse it: [Dense.Upload] (or [Dense.UploadAsync]) makes it resident
// on a [DeviceMemory] and returns the device buffer, reusing a current copy
// without a transfer; [Dense.DeviceWrote] records that an operation there
// changed it; [Dense.Download] (or [Dense.DownloadAsync], or any host
// accessor) brings the current value back; [Dense.Where] tells where it is
// now. DeviceMemory is the device binding's allocation and copy functions;
// [HostDevice] is host memory posing as a device.
//
// Stages declare the regions they read and write; the pats package uses
// those declarations to stage (read) inputs ahead of the computation and to
// commit outputs when a stage instance completes.
//
// Malformed identifiers, missing regions and boxes outside a region's bounds
// are reported as errors wrapping [ErrBadID], [ErrNotFound] and
// [ErrOutOfBounds], with the identifier or box in the message.
package region

// Reads an OME-Zarr NGFF 0.5 image with zarrita, a Zarr v3 implementation
// independent of this project, and prints its version, then for each
// multiscale dataset "WxH:SUM" of channel 0 (its shape and the sum of its
// pixels), space-separated.
// Usage: node zarrita_levels.mjs IMAGE.ome.zarr (NODE_PATH: zarrita's node_modules)
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";

const root = zarr.root(new FileSystemStore(process.argv[2]));
const group = await zarr.open(root, { kind: "group" });
const ome = group.attrs.ome;
const out = [ome.version];
for (const ds of ome.multiscales[0].datasets) {
  const arr = await zarr.open(root.resolve(ds.path), { kind: "array" });
  const { data, shape } = await zarr.get(arr, [0, null, null]);
  let sum = 0n;
  for (const v of data) sum += BigInt(v);
  out.push(`${shape[1]}x${shape[0]}:${sum}`);
}
console.log(out.join(" "));

/// What one request sees of the stack: the layers, how their inode numbers are shown, the
/// node table's generation whose placements speak of them, where the root merges, and the
/// directory descriptors opened in them. Immutable and replaced whole (by a change of the
/// patches or of the substitution, and by every invalidation of the whole tree); a `Request`
/// holds the view current when it is made and reads only it to its end, so a swap waits for no
/// request and no request waits for a swap. A layer's descriptor closes when the last view
/// holding it goes.
final class StackView: Sendable {
    let layers: LayerStack
    /// The tags of the layers' file systems (see `InodeNumbers`): those of every view before,
    /// and this one's.
    let inodes: InodeNumbers
    /// The generation and root placement nodes are read with (see `NodeTable.Generation`).
    let generation: NodeTable.Generation
    /// Descriptors of directories of these layers recently looked in.
    let directories: DirectoryCache

    init(layers: LayerStack, inodes: InodeNumbers, generation: NodeTable.Generation, directories: DirectoryCache) {
        self.layers = layers
        self.inodes = inodes
        self.generation = generation
        self.directories = directories
    }
}

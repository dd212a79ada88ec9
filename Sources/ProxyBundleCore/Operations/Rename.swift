#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// rename(2), with RENAME_NOREPLACE and RENAME_EXCHANGE. Everything moves within the
/// substitution: a file is copied up first; a directory with content in a layer below is
/// materialized first (its visible tree copied into one opaque directory, see Materialize.swift).
/// A name a layer below shows gets its whiteout before the substitution's entry leaves it, so a
/// crash may leave an entry under both names but never under neither.
extension Overlay {
    public func rename(_ request: Request, _ name: [UInt8], in parent: NodeID, to newName: [UInt8], in newParent: NodeID,
                       flags: UInt32) throws(Errno) {
        do {
            return try request.changing { (change: borrowing Change) throws(Errno) in
                try renameHeld(request, change, name, in: parent, to: newName, in: newParent, flags: flags)
            }
        } catch let error where error == Overlay.materializesAlone {
            // a directory to materialize: the rename starts over, alone (see `changes`)
            try request.changingAlone { (change: borrowing Change) throws(Errno) in
                try renameHeld(request, change, name, in: parent, to: newName, in: newParent, flags: flags)
            }
        }
    }

    /// What a rename that must materialize a directory answers while its change is not alone
    /// (`changes` held shared); never passed on.
    private static let materializesAlone = Errno(EDEADLK)

    private func renameHeld(_ request: Request, _ change: borrowing Change, _ name: [UInt8], in parent: NodeID,
                            to newName: [UInt8], in newParent: NodeID, flags: UInt32) throws(Errno) {
        guard flags & ~(pb_RENAME_NOREPLACE | pb_RENAME_EXCHANGE) == 0,
              flags & pb_RENAME_NOREPLACE == 0 || flags & pb_RENAME_EXCHANGE == 0 else { throw Errno.invalid }
        try Names.checkNew(newName)
        if ControlFile(name: newName, in: newParent) != nil { throw Errno.notPermitted }
        try request.checkWritable(warn: warn)
        var (dir, source) = try visibleChild(request, name, in: parent)
        var newDir = try resolver.locate(request, newParent)
        guard newDir.placement.isDirectory else { throw Errno.notDirectory }
        var target = try absentAsNil { () throws(Errno) -> Resolved in try resolver.resolve(request, newName, in: newDir.path, newDir.placement) }
        // where names fold, a new spelling of the same name: the entry itself, respelled
        let respells = request.layers.foldsNames && parent == newParent && name != newName && CaseFold.equal(name, newName)
        if flags & pb_RENAME_EXCHANGE != 0 {
            guard target != nil else { throw Errno.noEntry }
            if parent == newParent && (name == newName || respells) { return }
            return try exchange(request, change, name, in: parent, with: newName, in: newParent)
        }
        if parent == newParent && name == newName { return }
        if respells { target = nil }
        if let target {
            if flags & pb_RENAME_NOREPLACE != 0 { throw Errno(EEXIST) }
            try checkReplace(request, target, at: newDir.path.appending(newName), by: source)
        }
        if source.placement.isDirectory && source.placement.reachesBelowSubstitution {
            try prepareByName(request, change, name, in: parent)
            (dir, source) = try visibleChild(request, name, in: parent)
            newDir = try resolver.locate(request, newParent)
            target = respells ? nil : try absentAsNil { () throws(Errno) -> Resolved in
                try resolver.resolve(request, newName, in: newDir.path, newDir.placement)
            }
        }
        let hidesBelowSource = try resolver.shownBelowSubstitution(request, name, in: parent, dir)
        let hidesBelowTarget = try resolver.shownBelowSubstitution(request, newName, in: newParent, newDir)
        if !source.placement.inSubstitution { try prepareByName(request, change, name, in: parent) }
        let replacesSubstitutionDirectory = source.placement.isDirectory && target?.placement.isDirectory == true
            && target?.placement.inSubstitution == true
        let fromPath = try copyUp.substitutionDirectory(request, change, parent)
        let toPath = try copyUp.substitutionDirectory(request, change, newParent)
        let replaced = target.flatMap { removedEntry(request, newName, in: newParent, newDir, $0) }
        do throws(Errno) {
            try move(request, change, name, fromPath, to: newName, toPath, flags: flags, source: source,
                     hidesBelow: (hidesBelowSource, hidesBelowTarget),
                     replacesSubstitutionDirectory: replacesSubstitutionDirectory, respells: respells)
        } catch {
            if let replaced { Sys.close(replaced) }
            throw error
        }
        request.directories.added(newName, in: newParent)
        nodes.move(parent: parent, name: name, to: newParent, newName, keeping: replaced)
        nodes.forgetOtherSpellings(request, changed: [parent, newParent], made: [(newParent, newName)], gone: [(parent, name)])
    }

    /// The substitution's part of a rename: `name` of directory `fromPath` becomes `newName`
    /// of `toPath`, with the whiteouts and opaque markers the layers below call for.
    private func move(_ request: Request, _ change: borrowing Change, _ name: [UInt8], _ fromPath: LayerPath,
                      to newName: [UInt8], _ toPath: LayerPath, flags: UInt32,
                      source: Resolved, hidesBelow: (source: Bool, target: Bool),
                      replacesSubstitutionDirectory: Bool, respells: Bool) throws(Errno) {
        let (hidesBelowSource, hidesBelowTarget) = hidesBelow
        let layer = try request.substitution
        try layer.withSpelledDirectory(fromPath) { (fromfd: Int32, fromSpelled: LayerPath) throws(Errno) in
            try layer.withSpelledDirectory(toPath) { (tofd: Int32, toSpelled: LayerPath) throws(Errno) in
                // where names fold, each name as the substitution spells it (the source was
                // copied up with its own spelling; a target there keeps its entry's), unless
                // the rename only respells the name
                let name = layer.spelling(of: name, in: fromSpelled, at: fromfd) ?? name
                let newName = respells ? newName : layer.spelling(of: newName, in: toSpelled, at: tofd) ?? newName
                if source.placement.isDirectory && hidesBelowTarget {
                    // the moved directory must not merge with the entry below that it lands on
                    try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in try Overlay.markOpaque(p, in: fromfd) }
                }
                if replacesSubstitutionDirectory {
                    // the target (empty as shown, but it may hold whiteouts) trades places with
                    // the source, and is then removed from the source's name
                    try renameAt(fromfd, name, tofd, newName, pb_RENAME_EXCHANGE)
                    let device = hidesBelowSource && Whiteout.needsDevice(name)
                    if hidesBelowSource && !device { try Whiteout.write(hiding: name, in: fromfd) }
                    try removeSubstitutionEntry(request, change, name, in: fromfd, isDirectory: true, leavingWhiteout: device)
                    return
                }
                if source.placement.isDirectory, try Whiteout.deviceExists(newName, in: tofd) {
                    // a directory cannot be renamed over the device: it trades places with it
                    try renameAt(fromfd, name, tofd, newName, pb_RENAME_EXCHANGE)
                    if hidesBelowSource && Whiteout.needsDevice(name) { return }  // the device now hides the old name
                    if hidesBelowSource { try Whiteout.write(hiding: name, in: fromfd) }
                    try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in _ = try Sys.check { unlinkat(fromfd, p, 0) } }
                    return
                }
                if hidesBelowSource && Whiteout.needsDevice(name) {
                    // the whiteout device is left where the name was, in the same step
                    return try renameAt(fromfd, name, tofd, newName, flags | pb_RENAME_WHITEOUT)
                }
                if hidesBelowSource { try Whiteout.write(hiding: name, in: fromfd) }
                do throws(Errno) {
                    try renameAt(fromfd, name, tofd, newName, flags)
                } catch {
                    if hidesBelowSource { try? Whiteout.remove(hiding: name, in: fromfd) }
                    throw error
                }
                // the whiteout of the new name goes: a directory that lands on a name a layer
                // below shows was made opaque above, so the whiteout hides nothing more, and a
                // layer holding both is read two ways by the tools that apply it as an OCI layer
                try? Whiteout.remove(hiding: newName, in: tofd)
            }
        }
    }

    /// RENAME_EXCHANGE: both names stay visible, so no whiteout changes; each side is first
    /// made to live wholly in the substitution, and a directory landing where a layer below
    /// has an entry is made opaque.
    private func exchange(_ request: Request, _ change: borrowing Change, _ name: [UInt8], in parent: NodeID,
                          with newName: [UInt8], in newParent: NodeID) throws(Errno) {
        try prepareByName(request, change, name, in: parent)
        try prepareByName(request, change, newName, in: newParent)
        let (dir, source) = try visibleChild(request, name, in: parent)
        let (newDir, target) = try visibleChild(request, newName, in: newParent)
        let fromPath = try copyUp.substitutionDirectory(request, change, parent)
        let toPath = try copyUp.substitutionDirectory(request, change, newParent)
        let hidesBelowSource = try resolver.shownBelowSubstitution(request, name, in: parent, dir)
        let hidesBelowTarget = try resolver.shownBelowSubstitution(request, newName, in: newParent, newDir)
        try request.substitution.withDirectory(fromPath) { (fromfd: Int32) throws(Errno) in
            try request.substitution.withDirectory(toPath) { (tofd: Int32) throws(Errno) in
                if source.placement.isDirectory, hidesBelowTarget {
                    try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in try Overlay.markOpaque(p, in: fromfd) }
                }
                if target.placement.isDirectory, hidesBelowSource {
                    try newName.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in try Overlay.markOpaque(p, in: tofd) }
                }
                try renameAt(fromfd, name, tofd, newName, pb_RENAME_EXCHANGE)
            }
        }
        nodes.exchange(parent: parent, name: name, with: newParent, newName)
        nodes.forgetOtherSpellings(request, changed: [parent, newParent])
    }

    private func renameAt(_ fromfd: Int32, _ name: [UInt8], _ tofd: Int32, _ newName: [UInt8], _ flags: UInt32) throws(Errno) {
        try name.withCStringCopy { (from: UnsafePointer<CChar>) throws(Errno) in
            try newName.withCStringCopy { (to: UnsafePointer<CChar>) throws(Errno) in
                _ = try Sys.check { pb_renameat2(fromfd, from, tofd, to, flags) }
            }
        }
    }

    private func checkReplace(_ request: Request, _ target: Resolved, at path: LayerPath, by source: Resolved) throws(Errno) {
        switch (source.placement.isDirectory, target.placement.isDirectory) {
        case (true, false): throw Errno.notDirectory
        case (false, true): throw Errno.isDirectory
        case (true, true):
            if try !lister.mergedEntries(request, path, target.placement).isEmpty { throw Errno(ENOTEMPTY) }
        case (false, false): break
        }
    }

    /// Makes the entry `name` of `parent` live wholly in the substitution: a file is copied
    /// up, a directory with content below the substitution materialized.
    private func prepareByName(_ request: Request, _ change: borrowing Change, _ name: [UInt8], in parent: NodeID) throws(Errno) {
        let entry = try lookup(request, parent: parent, name: name)
        defer { forget(entry.node, count: 1) }
        let placement = try resolver.locate(request, entry.node).placement
        if placement.isDirectory {
            // the copy of the tree must see every change made beneath it, and miss none
            if placement.reachesBelowSubstitution && !change.isAlone { throw Overlay.materializesAlone }
            try copyUp.materialize(request, change, entry.node)
        } else {
            try copyUp.copyUp(request, change, entry.node)
        }
    }
}
